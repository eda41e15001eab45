package kimiharness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type streamed struct {
	text   string
	calls  []map[string]any
	finish string
	usage  map[string]any
	done   bool
}

// chat posts a chat request with messages and reads the streamed answer.
func chat(t *testing.T, ctx context.Context, m *Mock, messages ...map[string]any) (streamed, int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "mock-model", "stream": true,
		"stream_options": map[string]any{"include_usage": true}, "messages": messages})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.URL+"/chat/completions", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s streamed
	if resp.StatusCode != http.StatusOK {
		return s, resp.StatusCode
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			s.done = true
			continue
		}
		var chunk struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content   string           `json:"content"`
					ToolCalls []map[string]any `json:"tool_calls"`
				} `json:"delta"`
				Finish *string `json:"finish_reason"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if chunk.Object != "chat.completion.chunk" {
			t.Errorf("object %q", chunk.Object)
		}
		if chunk.Usage != nil {
			s.usage = chunk.Usage
		}
		for _, c := range chunk.Choices {
			s.text += c.Delta.Content
			s.calls = append(s.calls, c.Delta.ToolCalls...)
			if c.Finish != nil {
				s.finish = *c.Finish
			}
		}
	}
	return s, resp.StatusCode
}

func startScript(t *testing.T, s Script) *Mock {
	t.Helper()
	return StartMock(t, WriteScript(t, s))
}

func user(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

func TestMockStreamsTextAndToolCalls(t *testing.T) {
	t.Parallel()
	m := startScript(t, Script{Responses: []Response{
		{ToolCalls: []ToolCall{{Name: "Bash", Arguments: map[string]any{"command": "echo ü"}}}, Usage: &Usage{PromptTokens: 120000, CompletionTokens: 3}},
		{Text: "A reply long enough to take several chunks: ünïcödé survives the split."},
	}})
	ctx := context.Background()
	s, _ := chat(t, ctx, m, user("go"))
	if len(s.calls) != 1 || s.finish != "tool_calls" || !s.done {
		t.Fatalf("tool turn: %+v", s)
	}
	fn := s.calls[0]["function"].(map[string]any)
	if fn["name"] != "Bash" || fn["arguments"] != `{"command":"echo ü"}` || s.calls[0]["id"] == "" {
		t.Errorf("tool call %v", s.calls[0])
	}
	if s.usage["prompt_tokens"] != float64(120000) || s.usage["total_tokens"] != float64(120003) {
		t.Errorf("usage %v", s.usage)
	}
	start := time.Now()
	s, _ = chat(t, ctx, m, user("go"), map[string]any{"role": "assistant", "content": ""}, map[string]any{"role": "tool", "content": "ü"})
	if d := time.Since(start); d < turnEndLatency {
		t.Errorf("a turn-ending answer came after %v, want at least %v", d, turnEndLatency)
	}
	if s.text != "A reply long enough to take several chunks: ünïcödé survives the split." || s.finish != "stop" {
		t.Errorf("text turn: %+v", s)
	}
	s, _ = chat(t, ctx, m, user("more"))
	if !strings.Contains(s.text, "no answer left") {
		t.Errorf("exhausted script answered %q", s.text)
	}
	if n := len(m.Requests(t)); n != 3 {
		t.Errorf("%d requests logged", n)
	}
}

// A response's match looks only at what the request adds after the last
// assistant message, and a repeat response stays available.
func TestMockMatchesNewInput(t *testing.T) {
	t.Parallel()
	// Matching is the subject, not the turn-end latency (tested above):
	// a millisecond's delay keeps six turns from taking 1.8 s.
	const ms = 0.001
	m := startScript(t, Script{
		Responses: []Response{
			{Match: "first", Text: "one", Delay: ms},
			{Match: "again", Text: "repeated", Repeat: true, Delay: ms},
		},
		Default: &Response{Text: "default", Delay: ms},
	})
	ctx := context.Background()
	history := []map[string]any{user("first"), {"role": "assistant", "content": "x"}, user("second")}
	if s, _ := chat(t, ctx, m, history...); s.text != "default" {
		t.Errorf("matched old input: %q", s.text)
	}
	if s, _ := chat(t, ctx, m, map[string]any{"role": "system", "content": "first"}, user("nothing")); s.text != "default" {
		t.Errorf("matched a system message: %q", s.text)
	}
	if s, _ := chat(t, ctx, m, user("first")); s.text != "one" {
		t.Errorf("got %q", s.text)
	}
	if s, _ := chat(t, ctx, m, user("first")); s.text != "default" {
		t.Errorf("a used response was served again: %q", s.text)
	}
	for range 2 {
		if s, _ := chat(t, ctx, m, user("again")); s.text != "repeated" {
			t.Errorf("repeat: %q", s.text)
		}
	}
}

func TestMockErrorAndDelay(t *testing.T) {
	t.Parallel()
	m := startScript(t, Script{Responses: []Response{
		{Match: "slow", Delay: 30, Text: "late"},
		{Match: "fail", Error: &ResponseError{Status: 400, Message: "refused"}},
	}})
	if _, code := chat(t, context.Background(), m, user("fail")); code != http.StatusBadRequest {
		t.Errorf("error response: HTTP %d", code)
	}
	// A client that gives up ends the delayed answer (Kimi aborting a turn).
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	body, _ := json.Marshal(map[string]any{"stream": true, "messages": []any{user("slow")}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.URL+"/chat/completions", bytes.NewReader(body))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the delayed answer came early")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("gave up after %v", d)
	}
}

func TestMockRefusesBadScripts(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"bad-regex":     `{"responses":[{"match":"("}]}`,
		"unknown-field": `{"responses":[{"txt":"typo"}]}`,
		"not-json":      `responses`,
	} {
		p := filepath.Join(t.TempDir(), name+".json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadScript(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Every scenario in testdata parses, and the print-mode ones have a prompt.
func TestScenariosParse(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join("testdata", "scenarios", "*.json"))
	if len(files) < 7 {
		t.Fatalf("%d scenarios", len(files))
	}
	for _, f := range files {
		s, err := ReadScript(f)
		if err != nil {
			t.Error(err)
			continue
		}
		if filepath.Base(f) != "web.json" && s.Prompt == "" {
			t.Errorf("%s has no prompt", f)
		}
	}
}

// The config Kimi reads: the mock as the only provider, and the hook on
// every one of the 20 events.
func TestConfig(t *testing.T) {
	t.Parallel()
	b, err := Config(4242, `hook --x "y"`)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{`default_model = 'mock'`, `base_url = 'http://127.0.0.1:4242/v1'`, `type = 'openai'`, `telemetry = false`, `command = 'hook --x "y"'`} {
		if !strings.Contains(s, want) {
			t.Errorf("config lacks %s:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "[[hooks]]"); n != 20 {
		t.Errorf("%d hooks", n)
	}
	b, _ = Config(1, "")
	if strings.Contains(string(b), "hooks") {
		t.Errorf("hooks without a command:\n%s", b)
	}
}
