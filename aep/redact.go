package aep

import (
	"math/bits"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Redaction markers (AEP-0003 §9.4).
const (
	RedactedSecret = "[REDACTED:secret]"
	RedactedPII    = "[REDACTED:pii]"
	markerPrefix   = "[REDACTED:"
)

// minSecretValue is the shortest operator-configured secret value honoured:
// shorter ones would shred ordinary text.
const minSecretValue = 4

// maxQuotedValue bounds the search for the closing quote of a quoted
// credential value, keeping the scan linear on adversarial input.
const maxQuotedValue = 4096

// RedactOptions configures a Redactor. The zero value is the default
// pipeline with PII redaction on.
type RedactOptions struct {
	// Home is the operator's home directory, replaced by "~" (rule c). It is
	// ignored unless it is a path of at least two bytes.
	Home string
	// SecretValues are literal values to redact wherever they occur (rule
	// b); values shorter than 4 bytes are ignored.
	SecretValues []string
	// SecretNames are extra key names whose values are credentials,
	// case-insensitive, added to the built-in password, passwd, passphrase,
	// secret, api[_-]?key, token, authorization, cookie, credentials?,
	// private[_-]?key, access[_-]?key and secret[_-]?key. A key matches when
	// it ends with a name at a word boundary (DB_PASSWORD, accessToken), in
	// text assignments and in object keys alike.
	SecretNames []string
	// NoPII turns rule (d), emails and phone numbers, off.
	NoPII bool
}

// Redactor applies the AEP-0003 §9.4 pipeline in order: (a) secrets and
// credentials, (b) operator-configured secret values, (c) home paths, (d)
// emails and phone numbers. It redacts more than the normative floor where
// the floor leaks (quoted and next-line credential values, well-known bare
// token shapes, URL passwords, any user's home path). The zero value is
// ready to use; a Redactor is safe for concurrent use.
type Redactor struct {
	home         needle
	secretValues []needle
	secretNames  []string
	noPII        bool
}

// NewRedactor builds a Redactor from o.
func NewRedactor(o RedactOptions) *Redactor {
	r := &Redactor{noPII: o.NoPII}
	// A home that is not a path (no separator) could never be found by the
	// path stage; "/" alone would turn every path into "~".
	if home := strings.TrimRight(o.Home, `/\`); len(home) >= 2 && strings.ContainsAny(home, `/\`) {
		r.home = newNeedle(home)
	}
	var values []string
	for _, v := range o.SecretValues {
		if len(v) >= minSecretValue {
			values = append(values, v)
		}
	}
	// Longest first, so a value that contains another goes whole.
	sort.SliceStable(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	for _, v := range values {
		r.secretValues = append(r.secretValues, newNeedle(v))
	}
	for _, n := range o.SecretNames {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			r.secretNames = append(r.secretNames, n)
		}
	}
	return r
}

// Text redacts one string. Text with nothing to redact comes back as the
// same string without allocating.
func (r *Redactor) Text(s string) string { return r.redact(s, pass{}) }

// Command redacts a command line (a tool's argument text, which rules read
// and a person approves) as Text does, except that no redaction ever takes
// a shell operator (; & | ` < > $( a line break, or LineBreak): a
// credential value ends where the shell would end it (`password=x;rm`
// keeps `;rm`, `TOKEN=$(...)` and a backquoted value keep the command they
// run), and a finding that spans an operator (a quoted value, a key block)
// is replaced around it, each side by its own marker. The operators of the
// result are those of s, in order, so what runs after one stays readable.
// Only the configured home reads "~" (what the shell means by it); any other
// user's home becomes RedactedPII.
func (r *Redactor) Command(s string) string { return r.redact(s, pass{cmd: true}) }

// LineBreak is how a line break reads in a one-line argument text (the
// mapping's summary of a tool's input): Command keeps it as an operator.
const LineBreak = "⏎"

func (r *Redactor) redact(s string, ps pass) string {
	if r == nil {
		r = &Redactor{}
	}
	if s == "" {
		return s
	}
	h := scanHints(s)
	// (a) secrets and credentials.
	if h.dash && pemNeedle.index(s, 0) >= 0 {
		s = ps.replaceRe(pemBlockRe, s, RedactedSecret)
		s = ps.replaceRe(pemOpenRe, s, RedactedSecret)
	}
	s = redactTokens(s, ps)
	if h.letterB {
		s = redactBearer(s, ps)
	}
	if h.sep || h.dash {
		s = redactAssignments(s, r.secretNames, h, ps)
	}
	if h.at && h.sep {
		s = redactURLPasswords(s, ps)
	}
	if jwtNeedle.index(s, 0) >= 0 {
		s = ps.replaceRe(jwtRe, s, RedactedSecret)
	}
	// (b) operator-configured values.
	for _, v := range r.secretValues {
		s = replaceOutsideMarkers(s, v, RedactedSecret, ps)
	}
	// (c) home paths.
	if h.slash || h.backslash {
		s = r.redactHome(s, ps)
	}
	// (d) PII.
	if !r.noPII {
		if h.at {
			s = redactEmails(s, ps)
		}
		if h.phone {
			s = redactPhones(s, ps)
		}
	}
	return s
}

// Value redacts decoded JSON: strings go through Text, a non-null value
// under a credential-named key becomes RedactedSecret, other scalars are kept.
// It returns a new value and never modifies v.
func (r *Redactor) Value(v any) any {
	if r == nil {
		r = &Redactor{}
	}
	switch x := v.(type) {
	case string:
		return r.Text(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if val != nil && r.credentialKey(k) {
				out[k] = RedactedSecret
				continue
			}
			out[k] = r.Value(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = r.Value(item)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, val := range x {
			if r.credentialKey(k) {
				out[k] = RedactedSecret
				continue
			}
			out[k] = r.Text(val)
		}
		return out
	case []string:
		out := make([]string, len(x))
		for i, item := range x {
			out[i] = r.Text(item)
		}
		return out
	}
	return v
}

// credentialKey reports whether an object key names a credential.
func (r *Redactor) credentialKey(k string) bool {
	return endsWithCredential(k, r.secretNames)
}

// --- cheap pre-scan ---------------------------------------------------------------

// hints records which trigger bytes occur, so Text skips every rule that
// cannot match. Later stages only insert markers and "~", which add no
// trigger that matters, so hints from the input stay a sound superset.
type hints struct {
	// phone is false when no window holds enough digits for a phone number.
	phone                                    bool
	at, sep, dash, slash, backslash, letterB bool
}

// scanHints uses SIMD byte searches for the trigger bytes and a word-at-a-time
// digit count for phone numbers; both cost a small fraction of one pass of
// per-byte work.
func scanHints(s string) hints {
	has := func(c byte) bool { return strings.IndexByte(s, c) >= 0 }
	return hints{
		phone:     mayHoldPhone(s),
		at:        has('@'),
		sep:       has('=') || has(':'),
		dash:      has('-'),
		slash:     has('/'),
		backslash: has('\\'),
		letterB:   has('b') || has('B'),
	}
}

// phoneSpan is the longest stretch phoneMinDigits digits can occupy in a
// candidate: at most two separator bytes sit between consecutive digits.
const phoneSpan = phoneMinDigits + 2*(phoneMinDigits-1)

// mayHoldPhone reports whether some phoneSpan-byte window of s holds
// phoneMinDigits digits; when it does not, no phone number can be present.
// Any such window lies within phoneChunks consecutive 8-byte chunks.
func mayHoldPhone(s string) bool {
	const phoneChunks = (phoneSpan+7)/8 + 1
	var window [phoneChunks]int
	sum := 0
	for i, n := 0, 0; i < len(s); i, n = i+8, n+1 {
		var x uint64
		if i+8 <= len(s) {
			x = uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		} else {
			for k := len(s) - 1; k >= i; k-- {
				x = x<<8 | uint64(s[k])
			}
		}
		c := digitsIn8(x)
		sum += c - window[n%phoneChunks]
		window[n%phoneChunks] = c
		if sum >= phoneMinDigits {
			return true
		}
	}
	return false
}

// digitsIn8 counts the ASCII digits among eight bytes (SWAR): per 7-bit byte
// y, y+0x46 sets the high bit above '9' and y+0x50 sets it from '0' up, with
// no carry between bytes; bytes with the high bit set are not ASCII digits.
func digitsIn8(x uint64) int {
	const (
		high = 0x8080808080808080
		low7 = 0x7f7f7f7f7f7f7f7f
	)
	y := x & low7
	above9 := y + 0x4646464646464646
	from0 := y + 0x5050505050505050
	return bits.OnesCount64(from0 &^ above9 &^ x & high)
}

// --- rare-byte substring search ----------------------------------------------------

// needle is a literal searched for by its rarest byte: strings.IndexByte on a
// byte that seldom occurs in text skips far more than a search keyed on a
// common first byte ("eyJ" keyed on 'J', not 'e').
type needle struct {
	s string
	k int // index of the anchor byte in s
}

// commonBytes lists bytes from most to least common in prose, logs and code;
// any other byte (upper case, most punctuation) counts as rare.
const commonBytes = " etaoinsrhldcumfpgwyb.,/-_:0123456789\nvkxjqz=\"'()"

func newNeedle(s string) needle {
	best, bestRank := 0, -1
	for i := 0; i < len(s); i++ {
		rank := strings.IndexByte(commonBytes, s[i])
		if rank < 0 {
			rank = len(commonBytes)
		}
		if rank > bestRank {
			best, bestRank = i, rank
		}
	}
	return needle{s: s, k: best}
}

// index returns the first occurrence of n at or after from, or -1.
func (n needle) index(s string, from int) int {
	c := n.s[n.k]
	for p := from + n.k; p < len(s); p++ {
		j := strings.IndexByte(s[p:], c)
		if j < 0 {
			return -1
		}
		p += j
		if strings.HasPrefix(s[p-n.k:], n.s) {
			return p - n.k
		}
	}
	return -1
}

var (
	pemNeedle      = newNeedle("-----BEGIN")
	jwtNeedle      = newNeedle("eyJ")
	markerNeedle   = newNeedle(markerPrefix)
	schemeNeedle   = newNeedle("://")
	homeNeedle     = newNeedle("/home/")
	usersNeedle    = newNeedle("/Users/")
	winUsersNeedle = newNeedle(`\Users\`)
	flagDashNeedle = newNeedle("--")
)

// --- span helpers -----------------------------------------------------------------

type span struct{ start, end int }

// pass is how one redaction runs: over free text, or over a command line
// (cmd), where no replacement may take a shell operator.
type pass struct{ cmd bool }

// apply replaces each span (sorted, non-overlapping) with repl; on a
// command line the operators inside a span stay, and each run between them
// is replaced on its own.
func (ps pass) apply(s string, spans []span, repl string) string {
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(spans)*len(repl))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.start])
		if ps.cmd {
			writeAroundOperators(&b, s, sp, repl)
		} else {
			b.WriteString(repl)
		}
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// writeAroundOperators writes sp of s with each run of non-operator bytes
// replaced by repl and the operators kept.
func writeAroundOperators(b *strings.Builder, s string, sp span, repl string) {
	run := false
	for i := sp.start; i < sp.end; {
		if n := operatorAt(s, i); n > 0 {
			b.WriteString(s[i:min(i+n, sp.end)])
			i += n
			run = false
			continue
		}
		if !run {
			b.WriteString(repl)
			run = true
		}
		i++
	}
}

// operatorAt returns the length of the shell operator byte sequence at
// s[i] (0 when there is none): ; & | ` < > a line break, LineBreak, and
// both bytes of $( wherever i falls in it.
func operatorAt(s string, i int) int {
	switch s[i] {
	case ';', '&', '|', '`', '<', '>', '\n', '\r':
		return 1
	case '$':
		if i+1 < len(s) && s[i+1] == '(' {
			return 1
		}
	case '(':
		if i > 0 && s[i-1] == '$' {
			return 1
		}
	case LineBreak[0]:
		if strings.HasPrefix(s[i:], LineBreak) {
			return len(LineBreak)
		}
	}
	return 0
}

// endsValue reports whether a credential value scanned on a command line
// ends at s[i]: the shell ends an unquoted word at an operator.
func (ps pass) endsValue(s string, i int) bool {
	return ps.cmd && operatorAt(s, i) > 0
}

// replaceRe replaces re's matches with repl.
func (ps pass) replaceRe(re *regexp.Regexp, s, repl string) string {
	if !ps.cmd {
		return re.ReplaceAllLiteralString(s, repl)
	}
	var spans []span
	for _, m := range re.FindAllStringIndex(s, -1) {
		spans = append(spans, span{m[0], m[1]})
	}
	return ps.apply(s, spans, repl)
}

// mergeSpans sorts spans and joins overlapping ones.
func mergeSpans(spans []span) []span {
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	out := spans[:1]
	for _, sp := range spans[1:] {
		last := &out[len(out)-1]
		if sp.start <= last.end {
			last.end = max(last.end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// markerAt returns the end of a redaction marker starting at i, or -1.
func markerAt(s string, i int) int {
	if !strings.HasPrefix(s[i:], markerPrefix) {
		return -1
	}
	j := strings.IndexByte(s[i:], ']')
	if j < 0 {
		return -1
	}
	return i + j + 1
}

// replaceOutsideMarkers replaces every occurrence of v that does not overlap
// an existing marker, so a configured value like "secret" leaves
// "[REDACTED:secret]" alone and the pipeline stays idempotent.
func replaceOutsideMarkers(s string, v needle, repl string, ps pass) string {
	first := v.index(s, 0)
	if first < 0 {
		return s
	}
	var markers []span
	for i := 0; ; {
		start := markerNeedle.index(s, i)
		if start < 0 {
			break
		}
		end := markerAt(s, start)
		if end < 0 {
			break
		}
		markers = append(markers, span{start, end})
		i = end
	}
	var spans []span
	m := 0
	for start := first; start >= 0; {
		end := start + len(v.s)
		for m < len(markers) && markers[m].end <= start {
			m++
		}
		if m < len(markers) && markers[m].start < end {
			start = v.index(s, start+1)
			continue
		}
		spans = append(spans, span{start, end})
		start = v.index(s, end)
	}
	return ps.apply(s, spans, repl)
}

// --- byte classes -------------------------------------------------------------------

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isAlnum(c byte) bool { return isDigit(c) || isUpper(c) || isLower(c) }
func isWord(c byte) bool  { return isAlnum(c) || c == '_' }
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// --- (a) secrets -------------------------------------------------------------------

var (
	pemBlockRe = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]+-----[\s\S]*?-----END [A-Z0-9 ]+-----`)
	// A private key cut off before its END line (truncated tool output)
	// still goes, to the end of the text.
	pemOpenRe = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*`)
	jwtRe     = regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`)
)

// tokenShape is a well-known credential with a literal prefix.
type tokenShape struct {
	prefix string
	body   func(byte) bool
	// min is the shortest body; exact bodies (AWS keys) set max too.
	min, max int
	// boundary requires a non-word byte (or the start) before the prefix.
	boundary bool
}

func alnumBody(c byte) bool      { return isAlnum(c) }
func wordBody(c byte) bool       { return isWord(c) }
func wordDashBody(c byte) bool   { return isWord(c) || c == '-' }
func alnumDashBody(c byte) bool  { return isAlnum(c) || c == '-' }
func upperDigitBody(c byte) bool { return isUpper(c) || isDigit(c) }
func letterBody(c byte) bool     { return isUpper(c) || isLower(c) }

var tokenShapes = []tokenShape{
	// AWS access key ids: exactly 16 after the prefix, anywhere.
	{prefix: "AKIA", body: upperDigitBody, min: 16, max: 16},
	{prefix: "ASIA", body: upperDigitBody, min: 16, max: 16},
	{prefix: "ghp_", body: alnumBody, min: 20, boundary: true},
	{prefix: "gho_", body: alnumBody, min: 20, boundary: true},
	{prefix: "ghu_", body: alnumBody, min: 20, boundary: true},
	{prefix: "ghs_", body: alnumBody, min: 20, boundary: true},
	{prefix: "ghr_", body: alnumBody, min: 20, boundary: true},
	{prefix: "github_pat_", body: wordBody, min: 20, boundary: true},
	{prefix: "glpat-", body: wordDashBody, min: 20, boundary: true},
	{prefix: "xoxa-", body: alnumDashBody, min: 10, boundary: true},
	{prefix: "xoxb-", body: alnumDashBody, min: 10, boundary: true},
	{prefix: "xoxp-", body: alnumDashBody, min: 10, boundary: true},
	{prefix: "xoxr-", body: alnumDashBody, min: 10, boundary: true},
	{prefix: "xoxs-", body: alnumDashBody, min: 10, boundary: true},
	{prefix: "xoxo-", body: alnumDashBody, min: 10, boundary: true},
	{prefix: "xapp-", body: alnumDashBody, min: 10, boundary: true},
	{prefix: "sk-", body: wordDashBody, min: 20, boundary: true},
	{prefix: "sk_live_", body: alnumBody, min: 10, boundary: true},
	{prefix: "sk_test_", body: alnumBody, min: 10, boundary: true},
	{prefix: "rk_live_", body: alnumBody, min: 10, boundary: true},
	{prefix: "AIza", body: wordDashBody, min: 30, boundary: true},
	{prefix: "npm_", body: alnumBody, min: 36, boundary: true},
	{prefix: "hf_", body: letterBody, min: 30, boundary: true},
}

// tokenAnchors groups the shapes by the byte a search can jump to: the first
// '_' or '-' of the prefix, or its leading 'A'. Scanning for three rare-ish
// bytes is far cheaper than one substring search per prefix.
var tokenAnchors = func() (t [3][]anchoredShape) {
	for i := range tokenShapes {
		ts := &tokenShapes[i]
		off := strings.IndexAny(ts.prefix, "_-")
		switch {
		case off >= 0 && ts.prefix[off] == '_':
			t[0] = append(t[0], anchoredShape{ts, off})
		case off >= 0:
			t[1] = append(t[1], anchoredShape{ts, off})
		default:
			t[2] = append(t[2], anchoredShape{ts, 0})
		}
	}
	return t
}()

type anchoredShape struct {
	*tokenShape
	// off is where the anchor byte sits in the prefix.
	off int
}

var anchorBytes = [3]byte{'_', '-', 'A'}

// redactTokens replaces AWS key ids and the bare token shapes.
func redactTokens(s string, ps pass) string {
	var spans []span
	for a, shapes := range tokenAnchors {
		c := anchorBytes[a]
		for from := 0; from < len(s); {
			j := strings.IndexByte(s[from:], c)
			if j < 0 {
				break
			}
			p := from + j
			from = p + 1
			for _, as := range shapes {
				if end, ok := as.matchAt(s, p-as.off); ok {
					spans = append(spans, span{p - as.off, end})
					from = end
					break
				}
			}
		}
	}
	return ps.apply(s, mergeSpans(spans), RedactedSecret)
}

// matchAt reports whether the shape's token starts at start and where it ends.
func (ts *tokenShape) matchAt(s string, start int) (int, bool) {
	if start < 0 || !strings.HasPrefix(s[start:], ts.prefix) {
		return 0, false
	}
	if ts.boundary && start > 0 && isWord(s[start-1]) {
		return 0, false
	}
	body := start + len(ts.prefix)
	end := body
	for end < len(s) && ts.body(s[end]) && (ts.max == 0 || end-body < ts.max) {
		end++
	}
	return end, end-body >= ts.min
}

// bearerTokenByte is RFC 6750's b64token alphabet.
func bearerTokenByte(c byte) bool {
	return isAlnum(c) || strings.IndexByte("-._~+/", c) >= 0
}

// redactBearer replaces the token after a case-insensitive "Bearer ". Prose
// ("the bearer of good news") is spared: the token must be 8+ b64token bytes
// that look like a token, not a word.
func redactBearer(s string, ps pass) string {
	var spans []span
	for from := 0; from < len(s); {
		j := indexFold(s[from:], "bearer")
		if j < 0 {
			break
		}
		start := from + j
		from = start + len("bearer")
		if start > 0 && isWord(s[start-1]) {
			continue
		}
		k := from
		for k < len(s) && isSpace(s[k]) {
			k++
		}
		if k == from {
			continue
		}
		end := k
		for end < len(s) && bearerTokenByte(s[end]) {
			end++
		}
		for end < len(s) && s[end] == '=' {
			end++
		}
		if end-k < 8 || !tokenLike(s[k:end]) {
			continue
		}
		spans = append(spans, span{k, end})
		from = end
	}
	return ps.apply(s, spans, RedactedSecret)
}

// tokenLike tells a credential from an English word: a digit, a symbol, or
// an upper-case letter after the first byte.
func tokenLike(t string) bool {
	for i := 0; i < len(t); i++ {
		c := t[i]
		if isDigit(c) || !isAlnum(c) || (i > 0 && isUpper(c)) {
			return true
		}
	}
	return false
}

// indexFold finds an ASCII lower-case needle case-insensitively, jumping
// between occurrences of its first letter in either case.
func indexFold(s, needle string) int {
	lo, up := needle[0], needle[0]-('a'-'A')
	nextLo, nextUp := strings.IndexByte(s, lo), strings.IndexByte(s, up)
	for nextLo >= 0 || nextUp >= 0 {
		i := nextLo
		if i < 0 || (nextUp >= 0 && nextUp < i) {
			i = nextUp
		}
		if i+len(needle) > len(s) {
			return -1
		}
		if strings.EqualFold(s[i:i+len(needle)], needle) {
			return i
		}
		if i == nextLo {
			nextLo = indexByteFrom(s, lo, i+1)
		} else {
			nextUp = indexByteFrom(s, up, i+1)
		}
	}
	return -1
}

func indexByteFrom(s string, c byte, from int) int {
	j := strings.IndexByte(s[from:], c)
	if j < 0 {
		return -1
	}
	return from + j
}

// credentialWords are the key names whose values are credentials, lower
// case; a key matches when it ends with one at a word boundary (db_password,
// GITHUB_TOKEN, x-api-key, accessToken).
var credentialWords = []string{
	"password", "passwd", "passphrase", "secret",
	"apikey", "api_key", "api-key",
	"token", "authorization", "cookie",
	"credential", "credentials",
	"privatekey", "private_key", "private-key",
	"accesskey", "access_key", "access-key",
	"secretkey", "secret_key", "secret-key",
}

// credentialByLast indexes credentialWords by their last byte, so most keys
// are rejected with one table lookup.
var credentialByLast = func() (t [256][]string) {
	for _, w := range credentialWords {
		c := w[len(w)-1]
		t[c] = append(t[c], w)
	}
	return t
}()

// endsWithCredential reports whether key ends with a credential word (or one
// of extra, lower case) that starts a word: at the start, after a non-letter,
// or at a camelCase hump.
func endsWithCredential(key string, extra []string) bool {
	if key == "" {
		return false
	}
	last := key[len(key)-1]
	if isUpper(last) {
		last += 'a' - 'A'
	}
	for _, w := range credentialByLast[last] {
		if credentialSuffix(key, w) {
			return true
		}
	}
	for _, w := range extra {
		if credentialSuffix(key, w) {
			return true
		}
	}
	return false
}

func credentialSuffix(key, w string) bool {
	n := len(key) - len(w)
	if n < 0 || !strings.EqualFold(key[n:], w) {
		return false
	}
	if n == 0 {
		return true
	}
	prev := key[n-1]
	return !isAlnum(prev) || (isUpper(key[n]) && (isLower(prev) || isDigit(prev)))
}

// redactAssignments replaces credential values in key=value, key: value,
// "key": "value", key := value and --key value forms, including a value on
// the next line. Only the value goes; the key stays readable.
func redactAssignments(s string, extra []string, h hints, ps pass) string {
	var spans []span
	nextEq, nextColon := strings.IndexByte(s, '='), strings.IndexByte(s, ':')
	for from := 0; from < len(s); {
		if nextEq >= 0 && nextEq < from {
			nextEq = indexByteFrom(s, '=', from)
		}
		if nextColon >= 0 && nextColon < from {
			nextColon = indexByteFrom(s, ':', from)
		}
		p := nextEq
		if p < 0 || (nextColon >= 0 && nextColon < p) {
			p = nextColon
		}
		if p < 0 {
			break
		}
		from = p + 1
		sepLen := 1
		if s[p] == '=' {
			if p+1 < len(s) && s[p+1] == '=' {
				from = p + 2 // a comparison, not an assignment
				continue
			}
			if p > 0 && strings.IndexByte("!<>=", s[p-1]) >= 0 {
				continue
			}
		} else if p+1 < len(s) && s[p+1] == '=' {
			sepLen = 2 // :=
		}
		k := p
		for k > 0 && (s[k-1] == ' ' || s[k-1] == '\t') {
			k--
		}
		if k > 0 && (s[k-1] == '"' || s[k-1] == '\'' || s[k-1] == '`') {
			k--
		}
		key := s[:k]
		if !endsWithCredential(key, extra) {
			continue
		}
		sp, ok := credentialValue(s, p+sepLen, isAuthorization(key), ps)
		if !ok {
			continue
		}
		spans = append(spans, sp)
		from = max(from, sp.end)
	}
	if h.dash {
		spans = append(spans, flagValues(s, extra, ps)...)
	}
	return ps.apply(s, mergeSpans(spans), RedactedSecret)
}

func isAuthorization(key string) bool {
	return len(key) >= len("authorization") && strings.EqualFold(key[len(key)-len("authorization"):], "authorization")
}

// credentialValue finds the value that starts after whitespace at i: a
// quoted string's contents, else the next run of non-space bytes. For an
// authorization value "Scheme token" it takes the token and keeps the scheme.
// On a command line the value is the shell's: it starts on the same line,
// an unquoted one ends at an operator, a backquote runs a command rather
// than quoting one, and a double-quoted one ends where $( or ` would run one.
func credentialValue(s string, i int, authorization bool, ps pass) (span, bool) {
	for i < len(s) && (isSpace(s[i]) && !ps.cmd || s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i >= len(s) {
		return span{}, false
	}
	if q := s[i]; q == '"' || q == '\'' || q == '`' && !ps.cmd {
		if end, ok := closingQuote(s, i); ok {
			if ps.cmd && q == '"' {
				end = substitutionIn(s, i+1, end)
			}
			if end == i+1 || strings.HasPrefix(s[i+1:], markerPrefix) {
				return span{}, false
			}
			if authorization {
				if sp, scheme := schemeToken(s, i+1, end); scheme {
					return sp, sp.end > sp.start
				}
			}
			return span{i + 1, end}, true
		}
		i++
	}
	end := ps.wordEnd(s, i)
	if end == i || strings.HasPrefix(s[i:], markerPrefix) {
		return span{}, false
	}
	if authorization && isSchemeWord(s[i:end]) {
		k := end
		for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
			k++
		}
		tokEnd := ps.wordEnd(s, k)
		if tokEnd > k {
			if strings.HasPrefix(s[k:], markerPrefix) {
				return span{}, false
			}
			return span{k, tokEnd}, true
		}
	}
	return span{i, end}, true
}

// wordEnd is where the run of non-space bytes at i ends; on a command line
// an operator ends it too.
func (ps pass) wordEnd(s string, i int) int {
	for i < len(s) && !isSpace(s[i]) && !ps.endsValue(s, i) {
		i++
	}
	return i
}

// substitutionIn is where a command substitution ($( or `) first starts in
// s[from:end], else end: the shell runs it even inside double quotes.
func substitutionIn(s string, from, end int) int {
	for k := from; k < end; k++ {
		if s[k] == '`' || s[k] == '$' && k+1 < len(s) && s[k+1] == '(' {
			return k
		}
	}
	return end
}

// schemeToken splits a quoted authorization value "Scheme token" at the
// space. scheme reports whether the value has that form; the span is the
// token, empty when it is already redacted.
func schemeToken(s string, start, end int) (sp span, scheme bool) {
	v := s[start:end]
	cut := strings.IndexAny(v, " \t")
	if cut <= 0 || !isSchemeWord(v[:cut]) {
		return span{}, false
	}
	k := start + cut
	for k < end && (s[k] == ' ' || s[k] == '\t') {
		k++
	}
	if k == end || strings.HasPrefix(s[k:], markerPrefix) {
		return span{}, true
	}
	return span{k, end}, true
}

func isSchemeWord(w string) bool {
	if w == "" || len(w) > 16 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if !isUpper(w[i]) && !isLower(w[i]) && w[i] != '-' {
			return false
		}
	}
	return true
}

// closingQuote finds the quote closing the one at s[i], honouring backslash
// escapes, within maxQuotedValue bytes.
func closingQuote(s string, i int) (int, bool) {
	q := s[i]
	limit := min(len(s), i+1+maxQuotedValue)
	for k := i + 1; k < limit; k++ {
		switch s[k] {
		case '\\':
			k++
		case q:
			return k, true
		}
	}
	return 0, false
}

// flagValues finds --name value pairs (space-separated command-line flags)
// whose name is a credential; the --name=value form is an assignment.
func flagValues(s string, extra []string, ps pass) []span {
	var spans []span
	for from := 0; from < len(s); {
		j := flagDashNeedle.index(s, from)
		if j < 0 {
			break
		}
		start := j + 2
		from = start
		end := start
		for end < len(s) && (isWord(s[end]) || s[end] == '-') {
			end++
		}
		if end == start || end >= len(s) || (s[end] != ' ' && s[end] != '\t') {
			continue
		}
		if !endsWithCredential(s[start:end], extra) {
			continue
		}
		k := end
		for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
			k++
		}
		if k >= len(s) || s[k] == '-' || strings.HasPrefix(s[k:], markerPrefix) {
			continue
		}
		if q := s[k]; q == '"' || q == '\'' {
			if e, ok := closingQuote(s, k); ok && e > k+1 {
				if ps.cmd && q == '"' {
					e = substitutionIn(s, k+1, e)
				}
				if e > k+1 {
					spans = append(spans, span{k + 1, e})
				}
				from = e
				continue
			}
		}
		e := ps.wordEnd(s, k)
		if e > k {
			spans = append(spans, span{k, e})
		}
		from = max(e, from)
	}
	return spans
}

// redactURLPasswords replaces the password of scheme://user:password@host.
func redactURLPasswords(s string, ps pass) string {
	var spans []span
	for from := 0; from < len(s); {
		j := schemeNeedle.index(s, from)
		if j < 0 {
			break
		}
		start := j + 3
		from = start
		colon := -1
		for k := start; k < len(s) && k-start < 512; k++ {
			c := s[k]
			// '[' and ']' cannot appear in userinfo, and every marker has
			// them, so a password span never runs into earlier redactions.
			if c == '/' || c == '?' || c == '#' || c == '[' || c == ']' || isSpace(c) {
				break
			}
			if c == ':' && colon < 0 {
				colon = k
			}
			if c == '@' {
				if colon >= 0 && k > colon+1 && !strings.HasPrefix(s[colon+1:], markerPrefix) {
					spans = append(spans, span{colon + 1, k})
				}
				from = k
				break
			}
		}
	}
	return ps.apply(s, spans, RedactedSecret)
}

// --- (c) home paths ---------------------------------------------------------------

// pathNameByte is a byte that continues a path component, so a match that
// ends before one is not a whole component. '~' counts so that a home this
// stage already replaced never anchors another match.
func pathNameByte(c byte) bool { return isWord(c) || c == '-' || c == '.' || c == '~' }

// userNameByte is a byte of the <user> component of a home path.
func userNameByte(c byte) bool {
	return !isSpace(c) && strings.IndexByte("/\\\"'`<>|:;,()[]{}~", c) < 0
}

// redactHome replaces the configured home and any /home/<user>,
// /Users/<user> or X:\Users\<user> prefix with "~".
func (r *Redactor) redactHome(s string, ps pass) string {
	var spans []span
	if r.home.s != "" {
		for from := 0; ; {
			start := r.home.index(s, from)
			if start < 0 {
				break
			}
			end := start + len(r.home.s)
			from = start + 1
			if (start > 0 && pathNameByte(s[start-1])) || (end < len(s) && pathNameByte(s[end])) {
				continue
			}
			spans = append(spans, span{start, end})
			from = end
		}
	}
	if ps.cmd {
		// On a command line "~" means the home of whoever runs it: only
		// that home may read so. Another user's home is hidden by a
		// marker, so no allow rule takes it for "~" (a rule's `cat ~/*`
		// does not allow `cat /home/bob/x`).
		s = ps.apply(s, spans, "~")
		return ps.apply(s, otherHomes(s), RedactedPII)
	}
	spans = append(spans, otherHomes(s)...)
	return ps.apply(s, mergeSpans(spans), "~")
}

// otherHomes finds the /home/<user>, /Users/<user> and X:\Users\<user>
// prefixes of s.
func otherHomes(s string) []span {
	spans := appendHomeSpans(nil, s, homeNeedle)
	spans = appendHomeSpans(spans, s, usersNeedle)
	if strings.IndexByte(s, '\\') >= 0 {
		spans = appendHomeSpans(spans, s, winUsersNeedle)
	}
	return mergeSpans(spans)
}

// appendHomeSpans adds root<user> prefixes, taking in a drive letter before
// root (C:\Users\name, C:/Users/name).
func appendHomeSpans(spans []span, s string, root needle) []span {
	for from := 0; ; {
		start := root.index(s, from)
		if start < 0 {
			return spans
		}
		from = start + len(root.s)
		if start >= 2 && s[start-1] == ':' && (isUpper(s[start-2]) || isLower(s[start-2])) {
			start -= 2
		} else if root.s[0] == '\\' {
			continue
		}
		if start > 0 && pathNameByte(s[start-1]) {
			continue
		}
		end := from
		for end < len(s) && userNameByte(s[end]) {
			end++
		}
		if end == from {
			continue
		}
		spans = append(spans, span{start, end})
		from = end
	}
}

// --- (d) PII ----------------------------------------------------------------------

func emailLocalByte(c byte) bool  { return isAlnum(c) || strings.IndexByte("._%+-", c) >= 0 }
func emailDomainByte(c byte) bool { return isAlnum(c) || c == '.' || c == '-' }

// redactEmails replaces local@domain.tld addresses.
func redactEmails(s string, ps pass) string {
	var spans []span
	lastEnd := 0
	for from := 0; from < len(s); {
		j := strings.IndexByte(s[from:], '@')
		if j < 0 {
			break
		}
		at := from + j
		from = at + 1
		// The local part never reaches back into the previous address.
		start := at
		for start > lastEnd && emailLocalByte(s[start-1]) {
			start--
		}
		// The local part starts at a word byte, as \b would have it.
		for start < at && !isWord(s[start]) {
			start++
		}
		if start == at || (start > 0 && s[start-1] == '_') {
			continue
		}
		end := at + 1
		for end < len(s) && emailDomainByte(s[end]) {
			end++
		}
		for end > at+1 && (s[end-1] == '.' || s[end-1] == '-') {
			end--
		}
		if !emailDomain(s[at+1 : end]) {
			continue
		}
		// git@host is an SSH remote's service account, not a person.
		if s[start:at] == "git" {
			continue
		}
		spans = append(spans, span{start, end})
		from, lastEnd = end, end
	}
	return ps.apply(s, spans, RedactedPII)
}

// emailDomain accepts label(.label)+ ending in a 2+ letter TLD.
func emailDomain(d string) bool {
	dot := strings.LastIndexByte(d, '.')
	if dot <= 0 || len(d)-dot-1 < 2 || d[0] == '.' || d[0] == '-' {
		return false
	}
	for i := dot + 1; i < len(d); i++ {
		if !isUpper(d[i]) && !isLower(d[i]) {
			return false
		}
	}
	return !strings.Contains(d, "..")
}

// Phone numbers: 7 to 15 digits (E.164) in the shapes people write them.
const (
	phoneMinDigits = 7
	phoneMaxDigits = 15
)

func phoneSepByte(c byte) bool { return c == ' ' || c == '-' || c == '.' || c == '(' || c == ')' }

// redactPhones replaces phone numbers. It is deliberately shape-driven so
// versions (22.11.0), counts (42 tests), dates, IPs and plain long numbers
// stay: see phoneShape.
func redactPhones(s string, ps pass) string {
	var spans []span
	for i := 0; i < len(s); {
		c := s[i]
		if !(isDigit(c) || c == '+' || c == '(') {
			i++
			continue
		}
		if i > 0 {
			p := s[i-1]
			if isWord(p) || strings.IndexByte(".-+/\\#$%&=~]", p) >= 0 {
				// Inside a word, path, number or expression, or right after
				// a marker (so a second pass sees what the first did): skip
				// the run.
				i = skipRun(s, i)
				continue
			}
		}
		if sp, ok := phoneAt(s, i); ok {
			spans = append(spans, sp)
			i = sp.end
			continue
		}
		i = skipRun(s, i)
	}
	return ps.apply(s, spans, RedactedPII)
}

// skipRun moves past the digit/separator run at i.
func skipRun(s string, i int) int {
	j := i + 1
	for j < len(s) && (isDigit(s[j]) || phoneSepByte(s[j]) || s[j] == '+') {
		j++
	}
	return j
}

// phoneAt measures a candidate starting at i and judges its shape. It
// returns the span to replace; a leading '(' with no ')' is punctuation
// around the number, not part of it.
func phoneAt(s string, i int) (span, bool) {
	k := i
	if s[k] == '+' {
		k++
	}
	lastDigit, run := -1, 0 // run counts consecutive separator bytes
	for k < len(s) {
		c := s[k]
		if isDigit(c) {
			lastDigit, run = k, 0
			k++
			continue
		}
		if !phoneSepByte(c) || run == 2 {
			break
		}
		run++
		k++
	}
	if lastDigit < 0 {
		return span{}, false
	}
	end := lastDigit + 1
	if end < len(s) && (isWord(s[end]) || (strings.IndexByte(".-+", s[end]) >= 0 && end+1 < len(s) && isDigit(s[end+1]))) {
		return span{}, false
	}
	if s[i] == '(' && strings.IndexByte(s[i:end], ')') < 0 {
		i++
	}
	return span{i, end}, phoneShape(s[i:end])
}

// phoneShape decides whether a candidate (digits joined by separators, an
// optional leading '+') reads as a phone number rather than a version, date,
// IP address, range or count.
func phoneShape(cand string) bool {
	plus := cand[0] == '+'
	var groupBuf [phoneMaxDigits]int
	groups := groupBuf[:0]
	var seps [256]bool
	digits, cur := 0, 0
	for j := 0; j < len(cand); j++ {
		c := cand[j]
		if isDigit(c) {
			digits++
			cur++
			continue
		}
		if cur > 0 {
			if len(groups) == cap(groups) {
				return false
			}
			groups = append(groups, cur)
			cur = 0
		}
		seps[c] = true
	}
	if cur > 0 {
		if len(groups) == cap(groups) {
			return false
		}
		groups = append(groups, cur)
	}
	if digits < phoneMinDigits || digits > phoneMaxDigits {
		return false
	}
	hasDot, hasDash, hasSpace := seps['.'], seps['-'], seps[' ']
	if seps['('] || seps[')'] {
		return areaCode(cand)
	}
	shape := func(want ...int) bool {
		if len(groups) != len(want) {
			return false
		}
		for i, g := range want {
			if groups[i] != g {
				return false
			}
		}
		return true
	}
	dateLike := shape(4, 2, 2) || shape(2, 2, 4) || shape(4, 2, 2, 2) || shape(4, 2, 2, 2, 2)
	trunk := cand[0] == '0'
	switch {
	case plus:
		return true
	case dateLike:
		return false
	case len(groups) == 1:
		// A bare digit run is a count or an id unless it carries a +.
		return false
	case hasDot && !hasDash && !hasSpace:
		// Versions, IP addresses and decimals use dots; 555.123.4567 too.
		return shape(3, 3, 4)
	case hasDash:
		// 555-1234, 555-123-4567, 1-800-555-0199; not a 1000-2000 range.
		if shape(3, 4) {
			return true
		}
		if len(groups) < 3 {
			return false
		}
		for _, g := range groups {
			if g > 4 {
				return false
			}
		}
		return true
	default:
		// Space-separated: the North American 3-3-4, or a national number
		// with its 0 trunk prefix in 2-4 digit groups (020 7946 0958);
		// "1024 2048 4096" is a list of numbers.
		if shape(3, 3, 4) {
			return true
		}
		if !trunk || len(groups) < 3 {
			return false
		}
		for _, g := range groups {
			if g < 2 || g > 4 {
				return false
			}
		}
		return true
	}
}

// areaCode accepts parentheses only as one area code of 1-4 digits, at the
// start or after a +country code: (555) 123-4567, +1 (555) 123-4567.
func areaCode(cand string) bool {
	open, shut := strings.IndexByte(cand, '('), strings.IndexByte(cand, ')')
	if open < 0 || shut < open+2 || shut > open+5 ||
		strings.Count(cand, "(") != 1 || strings.Count(cand, ")") != 1 {
		return false
	}
	for j := open + 1; j < shut; j++ {
		if !isDigit(cand[j]) {
			return false
		}
	}
	prefix := strings.TrimRight(cand[:open], " -.")
	if prefix == "" {
		return true
	}
	if prefix[0] != '+' || len(prefix) < 2 || len(prefix) > 4 {
		return false
	}
	for j := 1; j < len(prefix); j++ {
		if !isDigit(prefix[j]) {
			return false
		}
	}
	return true
}
