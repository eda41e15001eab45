package kimiharness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
)

// Script is what the mock model answers, in the shape of a scenario file
// (testdata/scenarios/NAME.json).
type Script struct {
	// Prompt is the prompt a runner sends to start the scenario; the mock
	// ignores it.
	Prompt string `json:"prompt,omitempty"`
	// Responses are served in order: each chat request takes the first one
	// not yet used whose Match is found in the request's new input.
	Responses []Response `json:"responses"`
	// Default answers a request no response matches; nil means a short text.
	Default *Response `json:"default,omitempty"`
}

// Response is one scripted model turn.
type Response struct {
	// Match is a regular expression searched in the request's new input:
	// the JSON array of the messages after the last assistant message,
	// system messages left out. Empty matches anything.
	Match     string     `json:"match,omitempty"`
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Delay holds the answer back this many seconds, to keep a turn running
	// (to queue a prompt behind it or abort it). Zero means none, except for
	// an answer that ends the turn, which takes turnEndLatency.
	Delay float64 `json:"delay,omitempty"`
	// Error answers with an HTTP error instead: Kimi retries a 5xx and fails
	// the turn on a 4xx.
	Error *ResponseError `json:"error,omitempty"`
	// Usage overrides the reported token usage; a prompt_tokens near the
	// model's context window makes Kimi compact.
	Usage *Usage `json:"usage,omitempty"`
	// Repeat keeps the response available after it is served.
	Repeat bool `json:"repeat,omitempty"`
}

// ToolCall is one function call the model makes.
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments any    `json:"arguments"`
}

// ResponseError is an HTTP error answer.
type ResponseError struct {
	Status  int    `json:"status"`
	Message string `json:"message"`
}

// Usage is the token usage a response reports.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// ScenarioFile is the path of a scenario kept in this package's
// testdata/scenarios.
func ScenarioFile(t testing.TB, name string) string {
	t.Helper()
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "internal", "testkit", "kimiharness", "testdata", "scenarios", name+".json")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no scenario %q: %v", name, err)
	}
	return p
}

// ReadScript reads a script file.
func ReadScript(path string) (Script, error) {
	var s Script
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("script %s: %w", path, err)
	}
	for i, r := range s.Responses {
		if _, err := regexp.Compile(r.Match); err != nil {
			return s, fmt.Errorf("script %s: response %d: %w", path, i, err)
		}
	}
	return s, nil
}

// WriteScript writes v (a Script, or anything marshalling to one) to a
// temporary file and returns its path.
func WriteScript(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// turnEndLatency is how long a turn-ending answer (text, no tool calls)
// takes when the script sets no delay, as a real model's does: Kimi kills a
// PostToolUse hook's process group 100 ms after the turn ends, and an
// instant answer would have the tests race the hook's start-up on a busy
// machine instead of testing what the hook delivers.
const turnEndLatency = 300 * time.Millisecond

// Mock is a scripted OpenAI-compatible chat-completions provider on a
// loopback port, running inside the test process.
type Mock struct {
	Port int
	// URL is the base URL a provider config points at (…/v1).
	URL string

	srv      *http.Server
	match    []*regexp.Regexp
	mu       sync.Mutex
	script   Script
	used     []bool
	requests []string
	calls    int
}

// StartMock serves the script at path on a free loopback port until the test
// ends.
func StartMock(t testing.TB, path string) *Mock {
	t.Helper()
	s, err := ReadScript(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMock(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// NewMock starts serving s on a free loopback port; Close stops it.
func NewMock(s Script) (*Mock, error) {
	m := &Mock{script: s, used: make([]bool, len(s.Responses))}
	for _, r := range s.Responses {
		re, err := regexp.Compile(r.Match)
		if err != nil {
			return nil, err
		}
		m.match = append(m.match, re)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m.Port = ln.Addr().(*net.TCPAddr).Port
	m.URL = fmt.Sprintf("http://127.0.0.1:%d/v1", m.Port)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.complete)
	mux.HandleFunc("GET /v1/models", m.models)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln) //nolint:errcheck // ends with Close
	return m, nil
}

// Close stops the server and drops its connections (a delayed answer is cut
// off).
func (m *Mock) Close() { m.srv.Close() } //nolint:errcheck // nothing to do about it

// Requests returns the bodies of the chat requests served so far, in order.
func (m *Mock) Requests(t testing.TB) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.requests...)
}

// chatRequest is the part of a chat-completions request the mock reads.
type chatRequest struct {
	Model         string            `json:"model"`
	Stream        bool              `json:"stream"`
	Messages      []json.RawMessage `json:"messages"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// newInput is the messages after the last assistant message, system ones
// left out, as a JSON array: what this request adds to the conversation.
func newInput(msgs []json.RawMessage) string {
	var tail []string
	for _, raw := range msgs {
		var m struct {
			Role string `json:"role"`
		}
		json.Unmarshal(raw, &m) //nolint:errcheck // a message without a role just counts as input
		switch m.Role {
		case "assistant":
			tail = tail[:0]
		case "system":
		default:
			tail = append(tail, string(raw))
		}
	}
	return "[" + strings.Join(tail, ",") + "]"
}

// pick takes the response for a request and numbers its tool calls.
func (m *Mock) pick(body []byte, req chatRequest) (Response, int) {
	input := newInput(req.Messages)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, string(body))
	m.calls++
	for i, r := range m.script.Responses {
		if m.used[i] || !m.match[i].MatchString(input) {
			continue
		}
		if !r.Repeat {
			m.used[i] = true
		}
		return r, m.calls
	}
	if m.script.Default != nil {
		return *m.script.Default, m.calls
	}
	return Response{Text: "(mock model: the script has no answer left)"}, m.calls
}

func (m *Mock) models(w http.ResponseWriter, _ *http.Request) {
	httpguard.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
		map[string]any{"id": "mock-model", "object": "model", "owned_by": "aep-kimi"}}})
}

func (m *Mock) complete(w http.ResponseWriter, r *http.Request) {
	body, err := readAll(r)
	var req chatRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		httpguard.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": "bad request body: " + err.Error()}})
		return
	}
	resp, n := m.pick(body, req)
	delay := time.Duration(resp.Delay * float64(time.Second))
	if delay <= 0 && resp.Error == nil && len(resp.ToolCalls) == 0 {
		delay = turnEndLatency
	}
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
		return
	}
	if e := resp.Error; e != nil {
		status := e.Status
		if status == 0 {
			status = http.StatusBadRequest
		}
		httpguard.WriteJSON(w, status, map[string]any{"error": map[string]any{"message": e.Message, "type": "invalid_request_error"}})
		return
	}
	calls, err := toolCalls(resp.ToolCalls, n)
	if err != nil {
		httpguard.WriteJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{"message": err.Error()}})
		return
	}
	usage := map[string]int{"prompt_tokens": 100, "completion_tokens": 10}
	if u := resp.Usage; u != nil {
		usage["prompt_tokens"], usage["completion_tokens"] = u.PromptTokens, u.CompletionTokens
	}
	usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	model := req.Model
	if model == "" {
		model = "mock-model"
	}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": resp.Text}
		if len(calls) > 0 {
			for _, c := range calls {
				delete(c, "index")
			}
			msg["tool_calls"] = calls
		}
		httpguard.WriteJSON(w, http.StatusOK, map[string]any{"id": "chatcmpl-mock", "object": "chat.completion", "created": time.Now().Unix(),
			"model": model, "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	s := sse{w: w, model: model}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s.choice(map[string]any{"role": "assistant", "content": ""}, nil)
	for text := resp.Text; text != ""; {
		part := text[:min(len(text), 16)]
		for !utf8Boundary(text, len(part)) {
			part = text[:len(part)+1]
		}
		s.choice(map[string]any{"content": part}, nil)
		text = text[len(part):]
	}
	for _, c := range calls {
		s.choice(map[string]any{"tool_calls": []any{c}}, nil)
	}
	s.choice(map[string]any{}, finish)
	if req.StreamOptions.IncludeUsage {
		s.send(map[string]any{"choices": []any{}, "usage": usage})
	}
	s.line("[DONE]")
}

// toolCalls renders calls as streamed tool-call deltas, each complete in one
// chunk; ids are unique within the mock.
func toolCalls(calls []ToolCall, request int) ([]map[string]any, error) {
	var out []map[string]any
	for i, c := range calls {
		args, ok := c.Arguments.(string)
		if !ok {
			b, err := json.Marshal(c.Arguments)
			if err != nil {
				return nil, err
			}
			args = string(b)
		}
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_mock_%d_%d", request, i)
		}
		out = append(out, map[string]any{"index": i, "id": id, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": args}})
	}
	return out, nil
}

func utf8Boundary(s string, i int) bool { return i >= len(s) || s[i]&0xC0 != 0x80 }

// sse writes chat.completion.chunk server-sent events.
type sse struct {
	w     http.ResponseWriter
	model string
}

func (s sse) choice(delta map[string]any, finish any) {
	s.send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
}

func (s sse) send(chunk map[string]any) {
	chunk["id"], chunk["object"], chunk["created"], chunk["model"] = "chatcmpl-mock", "chat.completion.chunk", time.Now().Unix(), s.model
	b, _ := json.Marshal(chunk)
	s.line(string(b))
}

func (s sse) line(data string) {
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// readAll reads a request body of at most 64 MiB.
func readAll(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(http.MaxBytesReader(nil, r.Body, 64<<20))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, fmt.Errorf("body over %d bytes", tooBig.Limit)
		}
		return nil, err
	}
	return buf.Bytes(), nil
}
