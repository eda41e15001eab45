package aep

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestRedactTextRules(t *testing.T) {
	t.Parallel()
	r := NewRedactor(RedactOptions{Home: "/home/op", SecretValues: []string{"hunter2-deploy", "abc"}})
	cases := []struct {
		name, in, want string
	}{
		// (a) secrets
		{"pem block", "a\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\nb", "a\n[REDACTED:secret]\nb"},
		{"pem truncated private key", "key: -----BEGIN PRIVATE KEY-----\nMIIEv", "key: [REDACTED:secret]"},
		{"aws key id", "id AKIAIOSFODNN7EXAMPLE.", "id [REDACTED:secret]."},
		{"aws sts key id", "ASIAY34FZKBOKMUTVV7A", "[REDACTED:secret]"},
		{"bearer header", "Authorization: Bearer abc.DEF-123", "Authorization: Bearer [REDACTED:secret]"},
		{"bearer uppercase scheme", "BEARER Zm9vYmFyYmF6", "BEARER [REDACTED:secret]"},
		{"bearer prose", "the bearer of good news", "the bearer of good news"},
		{"bearer prose long word", "Bearer authentication is described", "Bearer authentication is described"},
		{"key=value", "export DB_PASSWORD=pa55word; next", "export DB_PASSWORD=[REDACTED:secret] next"},
		{"key: value", "api-key: 1234abcd", "api-key: [REDACTED:secret]"},
		{"json quoted", `{"token": "t0k", "n": 1}`, `{"token": "[REDACTED:secret]", "n": 1}`},
		{"json quoted with escape", `{"secret":"a\"b c"}`, `{"secret":"[REDACTED:secret]"}`},
		{"camelCase key", `accessToken = 'xyz 1'`, `accessToken = '[REDACTED:secret]'`},
		{"go short assignment", `token := mint()`, `token := [REDACTED:secret]`},
		{"value on the next line", "password:\n  s3cr3t\nuser: bob", "password:\n  [REDACTED:secret]\nuser: bob"},
		{"basic auth header", "Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [REDACTED:secret]"},
		{"cli flag", "mysql --password hunter3 -u root", "mysql --password [REDACTED:secret] -u root"},
		{"cli flag with equals", "tool --api-key=k123 run", "tool --api-key=[REDACTED:secret] run"},
		{"url password", "postgres://app:pw0rd@db.internal:5432/x", "postgres://app:[REDACTED:secret]@db.internal:5432/x"},
		{"jwt", "t=eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", "t=[REDACTED:secret]"},
		{"github pat", "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "[REDACTED:secret]"},
		{"slack", "xoxp-1234567890-abc", "[REDACTED:secret]"},
		{"openai key", "key sk-proj-AbCdEf123456GhIjKl789012.", "key [REDACTED:secret]."},
		{"google key", "AIzaSyA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tUvW", "[REDACTED:secret]"},
		// non-rules of (a)
		{"comparison is not assignment", "if token == other {", "if token == other {"},
		{"token count is not a credential", "max_tokens: 4096, token_count: 12", "max_tokens: 4096, token_count: 12"},
		{"word containing token", "mytoken: abc", "mytoken: abc"},
		{"sk- inside a word", "task-abcdefghijklmnopqrstuvwxyz", "task-abcdefghijklmnopqrstuvwxyz"},
		{"short ghp", "ghp_short", "ghp_short"},
		{"url without password", "ssh://deploy@localhost/x", "ssh://deploy@localhost/x"},
		// (b) configured values; too-short values are ignored
		{"secret value", "with hunter2-deploy now, abc", "with [REDACTED:secret] now, abc"},
		// (c) home paths
		{"configured home", "cd /home/op/src", "cd ~/src"},
		{"configured home is a whole component", "cd /home/opx/src", "cd ~/src"},
		{"other user home", "see /home/alice/notes.txt", "see ~/notes.txt"},
		{"mac home", "(/Users/bob)", "(~)"},
		{"windows home", `C:\Users\carol\AppData`, `~\AppData`},
		{"file url home", "file:///home/dave/x", "file://~/x"},
		{"not a home prefix", "/srv/home/erin/x", "/srv/home/erin/x"},
		// (d) PII
		{"email", "mail jane.doe+x@example.co.uk.", "mail [REDACTED:pii]."},
		{"git remote is not a person", "git@github.com:org/repo.git", "git@github.com:org/repo.git"},
		{"npm scoped version", "@scope/pkg@1.2.3", "@scope/pkg@1.2.3"},
		{"phone nanp", "call 555-123-4567 now", "call [REDACTED:pii] now"},
		{"phone dotted", "555.123.4567", "[REDACTED:pii]"},
		{"phone e164", "+442079460958", "[REDACTED:pii]"},
		{"phone national", "ring 020 7946 0958", "ring [REDACTED:pii]"},
		{"phone intl", "+33 6 12 34 56 78", "[REDACTED:pii]"},
		{"version", "node 22.11.0 pnpm 9.14.2", "node 22.11.0 pnpm 9.14.2"},
		{"ip address", "host 192.168.100.200 up", "host 192.168.100.200 up"},
		{"date", "on 2026-07-03 at noon", "on 2026-07-03 at noon"},
		{"timestamp", "2026-07-03T10:15:04.221Z", "2026-07-03T10:15:04.221Z"},
		{"range", "pages 1000-2000", "pages 1000-2000"},
		{"number list", "sizes 1024 2048 4096", "sizes 1024 2048 4096"},
		{"long count", "read 10485760 bytes", "read 10485760 bytes"},
		{"decimal", "pi 3.14159265", "pi 3.14159265"},
		{"uuid", "id 123e4567-e89b-12d3-a456-426614174000", "id 123e4567-e89b-12d3-a456-426614174000"},
		{"counts", "ran 42 tests, 0 failures, in 3.1s", "ran 42 tests, 0 failures, in 3.1s"},
		// order: (a) before (d)
		{"credential value holding an email", "password=foo@bar.com", "password=[REDACTED:secret]"},
		{"empty", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.Text(tc.in); got != tc.want {
				t.Errorf("Text(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestRedactorZeroValueAndNil(t *testing.T) {
	t.Parallel()
	in := "mail a@example.com key AKIAIOSFODNN7EXAMPLE at /home/x/y"
	want := "mail [REDACTED:pii] key [REDACTED:secret] at ~/y"
	var zero Redactor
	if got := zero.Text(in); got != want {
		t.Errorf("zero Redactor: got %q want %q", got, want)
	}
	var nilR *Redactor
	if got := nilR.Text(in); got != want {
		t.Errorf("nil Redactor: got %q want %q", got, want)
	}
	if got := NewRedactor(RedactOptions{}).Text(in); got != want {
		t.Errorf("NewRedactor(zero options): got %q want %q", got, want)
	}
}

func TestRedactNoPII(t *testing.T) {
	t.Parallel()
	r := NewRedactor(RedactOptions{NoPII: true})
	in := "mail a@example.com or 555-123-4567, token=abc"
	want := "mail a@example.com or 555-123-4567, token=[REDACTED:secret]"
	if got := r.Text(in); got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

func TestRedactSecretNames(t *testing.T) {
	t.Parallel()
	r := NewRedactor(RedactOptions{SecretNames: []string{"DEPLOY_PIN"}})
	if got := r.Text("DEPLOY_PIN=4711 and deploy_pin: 12"); got != "DEPLOY_PIN=[REDACTED:secret] and deploy_pin: [REDACTED:secret]" {
		t.Errorf("text: got %q", got)
	}
	got := r.Value(map[string]any{"deploy_pin": "4711", "other": "4711"})
	want := map[string]any{"deploy_pin": RedactedSecret, "other": "4711"}
	if !jsonEqual(t, got, want) {
		t.Errorf("value: got %v want %v", got, want)
	}
}

func TestRedactSecretValueInsideMarkerIsIdempotent(t *testing.T) {
	t.Parallel()
	r := NewRedactor(RedactOptions{SecretValues: []string{"secret", "REDACTED"}})
	in := "token=abc and secret here"
	once := r.Text(in)
	if once != "token=[REDACTED:secret] and [REDACTED:secret] here" {
		t.Fatalf("got %q", once)
	}
	if twice := r.Text(once); twice != once {
		t.Errorf("second pass changed %q to %q", once, twice)
	}
}

func TestRedactValue(t *testing.T) {
	t.Parallel()
	var r Redactor
	in := map[string]any{
		"headers":  map[string]any{"Authorization": "Basic x", "Accept": "a@b.io"},
		"password": nil,
		"apiKey":   json.Number("12345"),
		"argv":     []any{"--verbose", "AKIAIOSFODNN7EXAMPLE"},
		"n":        json.Number("42"),
		"ok":       true,
		"names":    []string{"/home/bob/x"},
	}
	orig, _ := Canonical(in)
	got := r.Value(in)
	want := map[string]any{
		"headers":  map[string]any{"Authorization": RedactedSecret, "Accept": RedactedPII},
		"password": nil,
		"apiKey":   RedactedSecret,
		"argv":     []any{"--verbose", RedactedSecret},
		"n":        json.Number("42"),
		"ok":       true,
		"names":    []string{"~/x"},
	}
	if !jsonEqual(t, got, want) {
		g, _ := Canonical(got)
		t.Errorf("got %s", g)
	}
	if after, _ := Canonical(in); string(after) != string(orig) {
		t.Errorf("Value modified its input: %s", after)
	}
}

func TestRedactCleanTextNoAlloc(t *testing.T) {
	var r Redactor
	allocs := testing.AllocsPerRun(100, func() { _ = r.Text(cleanBenchText) })
	if allocs != 0 {
		t.Errorf("clean text allocates %.0f times per call, want 0", allocs)
	}
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ca, err := Canonical(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Canonical(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ca) == string(cb)
}

// --- fuzzing and benchmarks ------------------------------------------------------------

var akiaRe = regexp.MustCompile(`AKIA[0-9A-Z]{16}`)

func FuzzRedactText(f *testing.F) {
	for _, s := range []string{
		"run with AKIAIOSFODNN7EXAMPLE please",
		"Authorization: Bearer abc123.DEF-456_ghi~789",
		"{\"api_key\": \"AQ0meta11223344\", \"region\": \"eu\"}",
		"token=\nZX12abcdef",
		"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
		"call +1 (555) 123-4567 or jane@example.com",
		"/home/alice/x C:\\Users\\bob\\y /Users/carol",
		"upgraded to node 22.11.0, ran 42 tests",
		"postgres://u:p@h/db --password x",
		"AKIAAKIA0000000000000000000000",
		"echo password=x;rm -rf /tmp/victim && TOKEN=$(id) `id`",
		"password=\"a;b$(c)\" ⏎ -----BEGIN PRIVATE KEY----- ⏎ x",
	} {
		f.Add(s)
	}
	r := NewRedactor(RedactOptions{Home: "/home/fuzz", SecretValues: []string{"s3cr3t"}})
	f.Fuzz(func(t *testing.T, s string) {
		out := r.Text(s)
		for _, key := range akiaRe.FindAllString(s, -1) {
			if strings.Contains(out, key) {
				t.Fatalf("AWS key %q survived: %q -> %q", key, s, out)
			}
		}
		if strings.Contains(out, "s3cr3t") {
			t.Fatalf("configured secret survived: %q -> %q", s, out)
		}
		// Redaction is a fixed point: markers and "~" never trigger a rule,
		// so a second pass finds nothing more. A relay re-applying the
		// pipeline to already-redacted text must not mangle it.
		if again := r.Text(out); again != out {
			t.Fatalf("not idempotent:\n in  %q\n out %q\n out2 %q", s, out, again)
		}
		// A command line keeps every operator, in order, and is redacted
		// as far as free text would be for what the shell reads as one word.
		cmd := r.Command(s)
		if got, want := operatorsOf(cmd), operatorsOf(s); got != want {
			t.Fatalf("Command took an operator:\n in  %q (%q)\n out %q (%q)", s, want, cmd, got)
		}
		if strings.Contains(cmd, "s3cr3t") {
			t.Fatalf("configured secret survived Command: %q -> %q", s, cmd)
		}
		if again := r.Command(cmd); again != cmd {
			t.Fatalf("Command not idempotent:\n in  %q\n out %q\n out2 %q", s, cmd, again)
		}
	})
}

// operatorsOf lists the shell operators of s in order (operatorAt's).
func operatorsOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if n := operatorAt(s, i); n > 0 {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		i++
	}
	return b.String()
}

// A command line's credential ends where the shell ends the word: the
// operator and what it runs stay readable, and a finding that spans an
// operator is replaced on each side of it.
func TestRedactCommand(t *testing.T) {
	t.Parallel()
	r := NewRedactor(RedactOptions{SecretValues: []string{"ab;cd"}})
	for in, want := range map[string]string{
		"echo password=x;rm -rf /tmp/victim":       "echo password=[REDACTED:secret];rm -rf /tmp/victim",
		"echo token=abc&&rm -rf ~":                 "echo token=[REDACTED:secret]&&rm -rf ~",
		"--api-key=k;rm":                           "--api-key=[REDACTED:secret];rm",
		"--api-key k|sh":                           "--api-key [REDACTED:secret]|sh",
		"TOKEN=$(rm -rf ~)":                        "TOKEN=$(rm -rf ~)",
		"authorization=Bearer x;rm":                "authorization=Bearer [REDACTED:secret];rm",
		"DB_PASSWORD=x|sh":                         "DB_PASSWORD=[REDACTED:secret]|sh",
		"password=`rm -rf /`":                      "password=`rm -rf /`",
		`password="abc$(rm -rf /)"`:                `password="[REDACTED:secret]$(rm -rf /)"`,
		`password="a;b" ok`:                        `password="[REDACTED:secret];[REDACTED:secret]" ok`,
		"password=\nrm -rf /":                      "password=\nrm -rf /",
		"password= ⏎ rm -rf /":                     "password= ⏎ rm -rf /",
		"echo ab;cd":                               "echo [REDACTED:secret];[REDACTED:secret]",
		"curl https://u:p;w@h/x":                   "curl https://u:[REDACTED:secret];[REDACTED:secret]@h/x",
		"-----BEGIN RSA PRIVATE KEY----- ⏎ MIIE ⏎": "[REDACTED:secret]⏎[REDACTED:secret]⏎",
		"go test ./... && go vet ./...":            "go test ./... && go vet ./...",
	} {
		if got := r.Command(in); got != want {
			t.Errorf("Command(%q)\n got  %q\n want %q", in, got, want)
		}
	}
	// Only the configured home reads "~" on a command line.
	h := NewRedactor(RedactOptions{Home: "/home/ann"})
	if got := h.Command("cat /home/ann/x /home/bob/y ~/z C:\\Users\\bob\\w"); got != "cat ~/x [REDACTED:pii]/y ~/z [REDACTED:pii]\\w" {
		t.Errorf("homes on a command line: %q", got)
	}
	if got := h.Text("cat /home/ann/x /home/bob/y"); got != "cat ~/x ~/y" {
		t.Errorf("homes in free text: %q", got)
	}
	// Free text keeps the wider reading: a value runs to the next space.
	if got := r.Text("password=ab&cd"); got != "password=[REDACTED:secret]" {
		t.Errorf("Text: %q", got)
	}
}

// cleanBenchText is ~1 KiB of ordinary tool output with nothing to redact.
var cleanBenchText = strings.Repeat("Compiling module graph: 42 packages resolved in 3.1s; wrote build/output.log (no changes). ", 11)

// secretBenchText is ~1 KiB with one of almost every kind of finding.
var secretBenchText = "export API_KEY=sk_live_abcdef123456 && curl -H 'Authorization: Bearer abc123.DEF-456' " +
	"https://x.test/home; key AKIAIOSFODNN7EXAMPLE, mail jane.doe@example.com, call +1 (555) 123-4567, " +
	"cwd /home/alice/project, token ghp_AbCdEfGhIjKlMnOpQrStUvWxYz012345 and jwt " +
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.SflKxwRJSMeKKF2QT4fwpM. " +
	strings.Repeat("Compiling module graph: 42 packages resolved in 3.1s. ", 11)

func BenchmarkRedactText(b *testing.B) {
	r := NewRedactor(RedactOptions{Home: "/home/bench", SecretValues: []string{"deploy-key-value"}})
	for _, bc := range []struct{ name, text string }{
		{"clean", cleanBenchText},
		{"prose", strings.Repeat("The quick brown fox jumps over the lazy dog, but the bearer of news was late. ", 13)},
		{"secrets", secretBenchText},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			b.ReportAllocs()
			for b.Loop() {
				_ = r.Text(bc.text)
			}
		})
	}
}

func TestPhoneHintIsSound(t *testing.T) {
	t.Parallel()
	naiveDigits := func(s string) int {
		n := 0
		for i := 0; i < len(s); i++ {
			if s[i] >= '0' && s[i] <= '9' {
				n++
			}
		}
		return n
	}
	// digitsIn8 against a byte count, including non-ASCII neighbours that
	// would carry into the next lane without the 7-bit mask.
	for _, s := range []string{"01234567", "\xff9\xff9\xff9\xff9", "/:09\x80\x8f\xb0\xb9", "aZ 0 9 x"} {
		var x uint64
		for k := 7; k >= 0; k-- {
			x = x<<8 | uint64(s[k])
		}
		if got, want := digitsIn8(x), naiveDigits(s); got != want {
			t.Errorf("digitsIn8(%q) = %d, want %d", s, got, want)
		}
	}
	// Whenever the scanner finds a phone number, the hint must have allowed
	// it: a hint of false with a match would be a missed redaction.
	for _, s := range []string{
		"x  5 5  5  1 2  3  4", "+1 (555) 123-4567", "555-1234", "pad pad 555 123 4567",
		"1234567", "0 1 2 3 4 5 6", strings.Repeat("a", 13) + "555.123.4567",
	} {
		if redactPhones(s, pass{}) != s && !mayHoldPhone(s) {
			t.Errorf("mayHoldPhone(%q) = false, but a phone number is there", s)
		}
	}
	if mayHoldPhone(cleanBenchText) || mayHoldPhone("ran 42 tests, 0 failures, in 3.1s") {
		t.Error("mayHoldPhone is true for text with only short numbers")
	}
}
