package main

import (
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
)

// formData is a question request as bridge-web offers it with control on:
// one single-select and one multi-select question, both taking other text,
// and a closed third one.
func formData() map[string]any {
	var d map[string]any
	json.Unmarshal([]byte(`{"kind":"form","prompt":"Deploy where? / Notify whom? / Really?","respond_via":["control","oob"],`+ //nolint:errcheck // constant
		`"options":[{"id":"dismiss","label":"Dismiss"}],"fields":[`+
		`{"id":"q_0","type":"select","label":"Deploy where?","other":true,"choices":[{"id":"opt_0_0","label":"staging"},{"id":"opt_0_1","label":"prod"}]},`+
		`{"id":"q_1","type":"select","label":"Notify whom?","multi":true,"other":true,"choices":[{"id":"opt_1_0","label":"ops"},{"id":"opt_1_1","label":"dev"}]},`+
		`{"id":"q_2","type":"select","label":"Really?","choices":[{"id":"opt_2_0","label":"yes"},{"id":"opt_2_1","label":"no"}]}]}`), &d)
	return d
}

func TestQuestionFlagValues(t *testing.T) {
	fields, _ := formData()["fields"].([]any)
	qs := mapping.FormQuestions(fields)
	cases := []struct {
		args []string
		want string // the values, or the error
	}{
		{[]string{"--choice", "2"}, `{"q_0":"opt_0_1"}`},
		{[]string{"--choice", "STAGING"}, `{"q_0":"opt_0_0"}`},
		{[]string{"--other", " blue-green "}, `{"q_0":"blue-green"}`},
		{[]string{"--choice", "prod", "--question", "2", "--choice", "1", "--choice", "dev", "--choice", "ops", "--other", "the boss", "--question", "Really?", "--choice", "no"},
			`{"q_0":"opt_0_1","q_1":["opt_1_0","opt_1_1","the boss"],"q_2":"opt_2_1"}`},
		{[]string{"--question", "q_1", "--other", "nobody"}, `{"q_1":["nobody"]}`},

		{[]string{"--choice", "3"}, `question 1 has no choice "3": choose 1 staging, 2 prod, or --other TEXT`},
		{[]string{"--question", "3", "--choice", "maybe"}, `question 3 has no choice "maybe": choose 1 yes, 2 no`},
		{[]string{"--question", "3", "--other", "maybe"}, `question 3 takes no words of your own: choose 1 yes, 2 no`},
		{[]string{"--question", "4", "--choice", "1"}, `no question "4": the request asks 1 Deploy where?, 2 Notify whom?, 3 Really?`},
		{[]string{"--choice", "1", "--choice", "2"}, `question 1 takes one answer (a --choice or --other), not several`},
		{[]string{"--choice", "1", "--other", "x"}, `question 1 takes one answer (a --choice or --other), not several`},
		{[]string{"--question", "2", "--other", "a", "--other", "b"}, `question 2 takes one --other`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var q questionFlags
			fs := flag.NewFlagSet("respond", flag.ContinueOnError)
			q.bind(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			values, err := q.values(qs)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				b, _ := json.Marshal(values)
				got = string(b)
			}
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestRespondQuestion: respond answers a question with --choice and
// --other, refuses a choice the question does not have, flags that do not
// fit the request and a question answered in Kimi's own UI first, each in
// one line before anything is sent. (No bridge owns these sessions, so the
// relay refuses what is sent: exit 3 proves it was.)
func TestRespondQuestion(t *testing.T) {
	srv := relaytest.RunServer(t, relay.Config{Token: "tok"})
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	seqs := map[string]int64{}
	asked := attnEvent(seqs, "sq", "attention.requested", "question_1", now, formData())
	gone := attnEvent(seqs, "sr", "attention.requested", "question_2", now, formData())
	gate := attnEvent(seqs, "sa", "attention.requested", "Bash", now, gateData("Kimi wants to use Bash: ls", now.Add(time.Minute)))
	srv.Post(t, asked, gone, gate,
		attnEvent(seqs, "sr", "attention.answered", gone.ID, now, map[string]any{"answer": map[string]any{"values": map[string]any{"q_0": "opt_0_0"}}, "via": "oob"}),
		attnEvent(seqs, "sr", "attention.resolved", gone.ID, now, map[string]any{"resolution": "answered"}))
	base := []string{"--relay", srv.URL, "--token-file", tf, "--window", "2s"}
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"a choice by number", []string{"--choice", "2", "sq"}, exitRejected, "rejected by the relay: no-route"},
		{"several questions", []string{"--choice", "prod", "--question", "2", "--choice", "ops", "--other", "the boss", "sq", asked.ID}, exitRejected, "no-route"},
		{"dismiss", []string{"--option", "dismiss", "sq"}, exitRejected, "no-route"},
		{"no such choice", []string{"--choice", "5", "sq"}, 2, `question 1 has no choice "5": choose 1 staging, 2 prod, or --other TEXT`},
		{"no such question", []string{"--question", "9", "--choice", "1", "sq"}, 2, `no question "9"`},
		{"an option on a question", []string{"--option", "deny", "sq"}, 2, "is a question: answer it with --choice N or --other TEXT (see aep-kimi pending), or dismiss it with --option dismiss"},
		{"text on three questions", []string{"--text", "prod", "sq"}, 2, "asks 3 questions: answer them with --question N --choice C"},
		{"a choice on a permission", []string{"--choice", "1", "sa"}, 2, "is not a question: answer it with --option (allow, deny)"},
		{"choice and option", []string{"--choice", "1", "--option", "deny", "sq"}, 2, "--option does not go with --choice or --other"},
		{"choice and text", []string{"--choice", "1", "--text", "x", "sq"}, 2, "--text does not go with --choice or --other (your own words: --other TEXT)"},
		{"a question without an answer", []string{"--question", "2", "sq"}, 2, "--question names the question"},
		{"always on a question", []string{"--choice", "1", "--always", "*", "sq"}, 2, "no rule answers a question"},
		{"answered in Kimi first", []string{"--choice", "1", "sr", gone.ID}, exitNotPending, "no longer waits (answered): answered in Kimi"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runIn(t, "respond", append(base, c.args...)...)
			if code != c.code || !strings.Contains(errOut, c.msg) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("exit %d stderr %q; want exit %d and one line naming %q", code, errOut, c.code, c.msg)
			}
		})
	}

	// pending shows the questions with their choices numbered as --choice
	// takes them, and the command that answers.
	code, out, errOut := runIn(t, "pending", "--relay", srv.URL, "--token-file", tf)
	if code != 0 {
		t.Fatalf("pending: exit %d %s", code, errOut)
	}
	for _, want := range []string{
		"1. Deploy where?: 1 staging · 2 prod · or your own words (--other)",
		"2. Notify whom? (any of): 1 ops · 2 dev · or your own words (--other)",
		"3. Really?: 1 yes · 2 no",
		"aep-kimi respond --relay " + srv.URL + " --choice N sq " + asked.ID,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pending lacks %q:\n%s", want, out)
		}
	}
}

// FuzzQuestionFlags reads arbitrary respond flags (NUL-separated) against
// arbitrary form fields: never a panic, and values it takes answer only
// the questions asked, one answer per single-select question, with offered
// choices and words of your own only where a question takes them.
func FuzzQuestionFlags(f *testing.F) {
	fields, _ := json.Marshal(formData()["fields"])
	f.Add(fields, "--choice\x002\x00--question\x002\x00--choice\x00ops\x00--other\x00x")
	f.Add(fields, "--question\x00Really?\x00--choice\x00NO\x00--question\x000\x00--choice\x00-1")
	f.Add([]byte(`[{"id":"1","type":"select","label":"2","choices":[{"id":"2","label":"1"}]}]`), "--question\x001\x00--choice\x001")
	f.Fuzz(func(t *testing.T, rawFields []byte, args string) {
		var fields []any
		if json.Unmarshal(rawFields, &fields) != nil {
			return
		}
		qs := mapping.FormQuestions(fields)
		var q questionFlags
		fs := flag.NewFlagSet("respond", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		q.bind(fs)
		if fs.Parse(strings.Split(args, "\x00")) != nil {
			return
		}
		values, err := q.values(qs)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error %q is not one line", err)
			}
			return
		}
		byID := map[string]mapping.Question{}
		for _, qu := range qs {
			byID[qu.ID] = qu
		}
		for id, v := range values {
			qu, ok := byID[id]
			if !ok {
				t.Fatalf("a value for %q, not asked", id)
			}
			items, isList := v.([]any)
			if isList != qu.Multi {
				t.Fatalf("question %q multi %v, value %#v", id, qu.Multi, v)
			}
			if !isList {
				items = []any{v}
			}
			words := 0
			for _, it := range items {
				s := it.(string)
				offered := false
				for _, c := range qu.Choices {
					offered = offered || c.ID == s
				}
				if !offered {
					words++
				}
			}
			if words > 1 || (words > 0 && !qu.Other) {
				t.Fatalf("question %+v answered %#v", qu, v)
			}
		}
	})
}
