// Command kimi-hook is the command Kimi Code runs for every external hook. It
// forwards the hook's stdin JSON to the aep-kimi adapter and relays the reply.
//
// It never breaks the agent: it always exits 0 and prints nothing unless the
// adapter's reply carries a decision or an instruction (Kimi appends a
// UserPromptSubmit hook's stdout to the model's context). When the adapter is
// unreachable, slow or refuses the token, the payload goes to the spool under
// <home>/kimi/spool/, which the adapter ingests later.
//
// Kimi kills PostToolUse/PostToolUseFailure hooks (SIGTERM to the process
// group, SIGKILL 100 ms later) when the turn ends, sometimes 35 ms after they
// start. So kimi-hook ignores SIGTERM from its first instruction, and a hook
// whose reply Kimi ignores (fire-and-forget) leaves that process group once
// it has read its payload (where the shell forked it), then writes the
// payload ahead to the spool before delivering it: a kill after the read
// loses nothing. To an
// awaited hook (a held PreToolUse) the same SIGTERM means Kimi stopped
// waiting (its hook timeout, an interrupted turn): it leaves at once, so the
// adapter sees the connection end then. Each delivery says how long
// kimi-hook waits for the reply (X-Kimi-Hook-Wait-Ms), so a held gate can
// answer inside it.
//
// It links only the standard library pieces it needs (no net/http), because
// Kimi spawns it for every hook and its start-up time is the hook's cost.
// `kimi-hook --version` (--version last) prints its build and reads
// nothing.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/buildinfo"
	"github.com/aep-kimi/aep-kimi/internal/procinfo"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
)

const (
	// DefaultDaemon is the adapter's default address.
	DefaultDaemon = "http://127.0.0.1:8398"
	// DefaultTimeout is Kimi's own default hook timeout, in seconds.
	DefaultTimeout = 30
	// MaxPayload is the largest payload forwarded; larger ones are spooled
	// for the adapter to quarantine, never silently dropped.
	MaxPayload = 4 << 20
	// hardCap bounds what is read from stdin at all.
	hardCap = 64 << 20
	// margin is kept between our wait and Kimi's timeout, so kimi-hook
	// spools and exits before Kimi kills it (the adapter's
	// HookGiveUpMargin: its gate answers before we stop waiting).
	margin = 1500 * time.Millisecond
	// awaitedCap bounds the wait of an awaited hook the adapter never holds:
	// the adapter answers those at once, so a longer wait means it is stuck.
	awaitedCap = 5 * time.Second
)

// awaited reports whether Kimi 2.1.0 waits for the hook's result; it runs
// every other hook fire-and-forget.
func awaited(event string) bool {
	switch event {
	case "PreToolUse", "UserPromptSubmit", "Stop", "SessionStart", "SessionEnd", "SubagentStart", "PreCompact":
		return true
	}
	return false
}

// The environment kimi-hook reads.
const (
	envHome    = "AEP_HOME"
	envLogSync = "AEP_LOG_SYNC"
)

type options struct {
	daemon  string
	home    string
	timeout time.Duration
	// sync is AEP_LOG_SYNC: unless none, a record left in the spool is
	// synced before kimi-hook exits (spool.Keep).
	sync syncmode.Mode
}

func main() {
	// First: a group SIGTERM at turn end must not kill us mid-delivery.
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, catchTerm)
	os.Exit(0)
}

// catchTerm turns SIGTERM from ignored to caught, for a hook the adapter may
// hold: to it, SIGTERM says Kimi stopped waiting. Only such a hook pays
// for it: catching a signal starts the runtime's signal thread; caught for
// every hook, it took a UserPromptSubmit from 16 futex calls and 3 clones
// to 26 and 5 (strace -f -c, bench/hookrt). The held hook sets it up while
// it names the Kimi process and connects (awaitHeld), not before.
// A SIGTERM in the moment before this returns is ignored; Kimi's SIGKILL
// 100 ms later still ends the connection.
func catchTerm() <-chan os.Signal {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	return term
}

// run forwards one hook. catch starts delivering the SIGTERM Kimi sends
// the hook's process group (nil: never).
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, catch func() <-chan os.Signal) {
	if n := len(args); n > 0 && (args[n-1] == "--version" || args[n-1] == "-version") {
		// Asked by a person or aep-setup check (which puts it last, after
		// flags an older kimi-hook reads: setup.HookBuild), never by Kimi:
		// its stdin is not read.
		fmt.Fprintln(stdout, buildinfo.Get().Line("kimi-hook"))
		return
	}
	opts, err := parseArgs(args)
	if err != nil {
		// Still never break the agent: note it and deliver with defaults.
		fmt.Fprintf(stderr, "kimi-hook: %v\n", err)
	}
	readAt := time.Now()
	payload, err := io.ReadAll(io.LimitReader(stdin, hardCap))
	if err != nil && len(payload) == 0 {
		fmt.Fprintf(stderr, "kimi-hook: reading stdin: %v\n", err)
		return
	}
	d := delivery{opts: opts, payload: payload, at: readAt, id: newDeliveryID(readAt)}
	event := ""
	if len(payload) <= MaxPayload {
		event = hookName(payload)
	}
	if !awaited(event) {
		// Before anything touches the disk: Kimi's kill at turn end must
		// not find a hook that has not written its payload yet.
		leaveGroup()
	}
	var catching <-chan (<-chan os.Signal)
	if held(event) && catch != nil && !quickLeave {
		// Setting up the catch takes a thread's start and a handshake with
		// it (0.4 ms median on a loaded machine): without the quick path,
		// it runs beside the work up to the request's write, which waits
		// for it (awaitHeld).
		c := make(chan (<-chan os.Signal), 1)
		go func() { c <- catch() }()
		catching = c
	}
	// The Kimi process this hook serves: the adapter watches it to end the
	// session when Kimi exits without SessionEnd.
	if pid, info, ok := procinfo.Served(); ok {
		d.pid, d.pidStart = pid, info.Start
	}
	if len(payload) > MaxPayload {
		d.spool("oversize", stderr)
		return
	}
	switch {
	case held(event) && catch != nil:
		d.awaitHeld(event, catch, catching, stdout, stderr)
		return
	case awaited(event):
		// Kimi waits for this reply (an instruction may ride it) and kills
		// the hook only on its own timeout, which the wait budget stays
		// under; the adapter answers it at once.
		reply, reason := d.post(opts.budget(event))
		d.answer(reply, reason, stdout, stderr)
		return
	}
	// Fire-and-forget: Kimi may kill us any moment after 35 ms, so the
	// payload goes to disk first (a fraction of a millisecond), then to the
	// adapter. Only a 200 (the events are in the log) removes the record; if
	// we die first, or the adapter answers anything else (503 not-durable
	// included), the adapter ingests it from the spool and its delivery id
	// dedupes it.
	_, rec, err := spool.Append(spool.Dir(opts.home), d.header("pending"), payload)
	if err != nil {
		fmt.Fprintf(stderr, "kimi-hook: could not write ahead to the spool: %v\n", err)
	}
	_, reason := d.post(opts.budget(event))
	switch {
	case rec == "":
	case reason == "":
		spool.Remove(rec) //nolint:errcheck // a leftover is deduped on ingest
	default:
		d.keep(rec, stderr) // the adapter did not take it: the record is its only copy
	}
}

// held reports whether the adapter's control gate may hold the hook until
// a person answers.
func held(event string) bool { return event == "PreToolUse" }

// awaitHeld delivers a hook the gate may hold, and leaves as soon as Kimi
// stops waiting for it (its hook timeout, an interrupted turn): leaving
// ends the connection, so the gate learns it at once rather than at the
// SIGKILL 100 ms later.
//
// Where it can (quickLeave), it catches no signal until the reply is
// quickReply late: from the request's write until then a SIGTERM ends the
// process at once, as the default action does; the adapter, which has the
// request, sees the connection end. Most PreToolUse hooks are answered
// within that (no gate, or a rule decides), and catching costs the
// runtime's signal thread and a handshake with it on the way. Past it, the
// hook catches SIGTERM and spools the payload before leaving ("abandoned"),
// in case the adapter never took it. Elsewhere catching yields the SIGTERM
// channel (set up since the hook started), and the request is written only
// once it is: the adapter never holds a hook that cannot hear Kimi give up.
func (d delivery) awaitHeld(event string, catch func() <-chan os.Signal, catching <-chan (<-chan os.Signal), stdout, stderr io.Writer) {
	conn, req, reason := d.connect(d.opts.budget(event))
	if reason != "" {
		d.spool(reason, stderr)
		return
	}
	var term <-chan os.Signal
	if catching != nil {
		term = <-catching
	}
	if reason := send(conn, req); reason != "" {
		conn.Close()
		d.spool(reason, stderr)
		return
	}
	if catching == nil {
		leaveOnTerm()
		if !conn.readable(quickReply) {
			term = catch()
		}
	}
	if term == nil {
		reply, reason := receive(conn)
		d.answer(reply, reason, stdout, stderr)
		return
	}
	type result struct {
		reply  []byte
		reason string
	}
	done := make(chan result, 1)
	go func() {
		reply, reason := receive(conn)
		done <- result{reply, reason}
	}()
	select {
	case r := <-done:
		d.answer(r.reply, r.reason, stdout, stderr)
	case <-term:
		d.spool("abandoned", stderr)
	}
}

// quickReply is how long a held hook waits for its reply before it catches
// SIGTERM (awaitHeld): far above an unheld answer, far below any hook
// timeout Kimi allows (1 s and up).
const quickReply = 200 * time.Millisecond

// answer prints the adapter's reply for Kimi when it carries a decision or
// an instruction, or spools the payload for reason.
func (d delivery) answer(reply []byte, reason string, stdout, stderr io.Writer) {
	if reason != "" {
		d.spool(reason, stderr)
		return
	}
	if out := decisionOutput(reply); out != nil {
		stdout.Write(out)
	}
}

func parseArgs(args []string) (options, error) {
	o := options{daemon: DefaultDaemon, timeout: DefaultTimeout * time.Second, sync: syncmode.Default}
	var bad error
	if m, err := syncmode.Parse(os.Getenv(envLogSync)); err != nil {
		bad = fmt.Errorf("%s: %w", envLogSync, err)
	} else {
		o.sync = m
	}
	if h := os.Getenv(envHome); h != "" {
		o.home = h
	} else if h, err := os.UserHomeDir(); err == nil {
		o.home = filepath.Join(h, ".aep")
	}
	table := hookFlags()
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			bad = fmt.Errorf("unexpected argument %q", a)
			continue
		}
		if !hasVal && i+1 < len(args) {
			i++
			val = args[i]
		}
		f := hookFlag{}
		for _, h := range table {
			if h.Name == name {
				f = h
			}
		}
		if f.set == nil {
			bad = fmt.Errorf("unknown flag %q (flags: %s; --version alone)", a, flagList(table))
			continue
		}
		if err := f.set(&o, val); err != nil {
			bad = err
		}
	}
	return o, bad
}

// hookFlag is one of kimi-hook's flags: the parser reads this table, and
// so do its error message and the reference (docs/reference/commands.md).
type hookFlag struct {
	Name, Arg, Default, Usage string
	set                       func(o *options, val string) error
}

// hookFlags is kimi-hook's flag table. It has no flag package parser: a
// bad flag is noted and the hook still delivered, with defaults.
func hookFlags() []hookFlag {
	return []hookFlag{
		{Name: "daemon", Arg: "URL", Default: DefaultDaemon, Usage: "the adapter's hook intake",
			set: func(o *options, v string) error { o.daemon = v; return nil }},
		{Name: "home", Arg: "DIR", Default: "$AEP_HOME, else ~/.aep",
			Usage: "AEP home: the hook token and the spool (kimi/spool/) under it",
			set:   func(o *options, v string) error { o.home = v; return nil }},
		{Name: "timeout", Arg: "SECONDS", Default: strconv.Itoa(DefaultTimeout),
			Usage: "the hook's timeout as registered in Kimi (1..600); kimi-hook gives up waiting " + margin.String() + " before it and spools the payload",
			set: func(o *options, v string) error {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 600 {
					return fmt.Errorf("--timeout %q: want seconds in 1..600", v)
				}
				o.timeout = time.Duration(n) * time.Second
				return nil
			}},
	}
}

// flagList is "--daemon URL --home DIR ...".
func flagList(table []hookFlag) string {
	var parts []string
	for _, f := range table {
		parts = append(parts, "--"+f.Name+" "+f.Arg)
	}
	return strings.Join(parts, " ")
}

// budget is how long to wait for the adapter's reply.
func (o options) budget(event string) time.Duration {
	b := o.timeout - margin
	if b < 500*time.Millisecond {
		b = 500 * time.Millisecond
	}
	if event != "PreToolUse" && b > awaitedCap {
		b = awaitedCap // only PreToolUse may be held by the control gate
	}
	return b
}

// hookName reads hook_event_name cheaply: Kimi writes it as the first key.
func hookName(p []byte) string {
	const prefix = `{"hook_event_name":"`
	if bytes.HasPrefix(p, []byte(prefix)) {
		rest := p[len(prefix):]
		if i := bytes.IndexByte(rest, '"'); i > 0 && plainASCII(rest[:i]) {
			return string(rest[:i])
		}
	}
	var v struct {
		Name string `json:"hook_event_name"`
	}
	json.Unmarshal(p, &v)
	return v.Name
}

// plainASCII reports whether a JSON string body needs no decoding: no
// escapes, no control or non-ASCII bytes (every hook name is plain ASCII).
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x80 || c == '\\' {
			return false
		}
	}
	return true
}

type delivery struct {
	opts    options
	payload []byte
	at      time.Time
	id      string
	// pid and pidStart name the Kimi process served (0: unknown).
	pid      int
	pidStart string
}

// post sends the payload to the adapter and returns its reply, or the reason
// to spool instead.
func (d delivery) post(wait time.Duration) ([]byte, string) {
	conn, req, reason := d.connect(wait)
	if reason != "" {
		return nil, reason
	}
	if reason := send(conn, req); reason != "" {
		conn.Close()
		return nil, reason
	}
	return receive(conn)
}

// connect dials the adapter and composes the request, or returns the
// reason to spool instead.
func (d delivery) connect(wait time.Duration) (*rawConn, []byte, string) {
	u, err := url.Parse(d.opts.daemon)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, nil, "unreachable"
	}
	token := readToken(d.opts.home)
	deadline := time.Now().Add(wait)
	conn, err := dial(u.Host, deadline)
	if err != nil {
		return nil, nil, timeoutOr(err, "unreachable")
	}
	path := strings.TrimSuffix(u.Path, "/") + "/hook"
	// How long we wait for the reply from now: a held gate answers before.
	req := d.request(path, u.Host, time.Until(deadline).Milliseconds(), token)
	return conn, req, ""
}

// requestHead is what a request holds besides the path, the host, the
// token and the payload, with room for the numbers and the time.
const requestHead = 512

// request composes the HTTP request in one buffer sized up front: growing
// one through fmt took a buffer of each size on the way and fmt's printer,
// heap pages a short-lived kimi-hook touches for the first time (page
// faults, its main cost after the runtime's start).
func (d delivery) request(path, host string, waitMs int64, token string) []byte {
	b := make([]byte, 0, requestHead+len(path)+len(host)+len(d.id)+len(d.pidStart)+len(token)+len(d.payload))
	b = append(b, "POST "...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(d.payload)), 10)
	b = append(b, "\r\nConnection: close\r\nX-Kimi-Hook-Delivery: "...)
	b = append(b, d.id...)
	b = append(b, "\r\nX-Kimi-Hook-Time: "...)
	b = d.at.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, "\r\nX-Kimi-Hook-Wait-Ms: "...)
	b = strconv.AppendInt(b, waitMs, 10)
	b = append(b, "\r\n"...)
	if d.pid > 0 {
		b = append(b, "X-Kimi-Hook-Pid: "...)
		b = strconv.AppendInt(b, int64(d.pid), 10)
		b = append(b, "\r\nX-Kimi-Hook-Pid-Start: "...)
		b = append(b, d.pidStart...)
		b = append(b, "\r\n"...)
	}
	if token != "" {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, token...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, d.payload...)
}

// send writes the request, or returns the reason to spool instead.
func send(conn *rawConn, req []byte) string {
	if _, err := conn.Write(req); err != nil {
		return timeoutOr(err, "unreachable")
	}
	return ""
}

// receive reads the adapter's reply and closes conn.
func receive(conn *rawConn) ([]byte, string) {
	defer conn.Close()
	status, body, err := readResponse(bufio.NewReader(conn))
	if err != nil {
		return nil, timeoutOr(err, "unreachable")
	}
	switch {
	case status == 200:
		return body, ""
	case status == 401 || status == 403:
		return nil, "unauthorized"
	case status == 503:
		// The adapter took the payload but could not make it durable: the
		// spool keeps it until the adapter can.
		return nil, "not-durable"
	default:
		return nil, "rejected"
	}
}

func timeoutOr(err error, other string) string {
	if errors.Is(err, errTimeout) {
		return "timeout"
	}
	return other
}

// errEOF is the peer closing before a full reply.
var errEOF = io.EOF

// readResponse parses the adapter's HTTP/1.1 reply: status, headers, and a
// Content-Length or chunked body.
func readResponse(r *bufio.Reader) (int, []byte, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, nil, err
	}
	parts := strings.SplitN(strings.TrimRight(line, "\r\n"), " ", 3)
	if len(parts) < 2 || (parts[0] != "HTTP/1.1" && parts[0] != "HTTP/1.0") {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	status, err := strconv.Atoi(parts[1])
	if err != nil || len(parts[1]) != 3 || status < 100 {
		return 0, nil, fmt.Errorf("bad status %q", parts[1])
	}
	length, chunked := -1, false
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			return 0, nil, err
		}
		h = strings.TrimSpace(h)
		if h == "" {
			break
		}
		k, v, _ := strings.Cut(h, ":")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "content-length":
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		case "transfer-encoding":
			chunked = strings.Contains(strings.ToLower(v), "chunked")
		}
	}
	const maxReply = 1 << 20
	switch {
	case chunked:
		var body bytes.Buffer
		for {
			sz, err := r.ReadString('\n')
			if err != nil {
				return 0, nil, err
			}
			n, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(sz, ";", 2)[0]), 16, 64)
			if err != nil || n < 0 || int64(body.Len())+n > maxReply {
				return 0, nil, fmt.Errorf("bad chunk")
			}
			if n == 0 {
				return status, body.Bytes(), nil
			}
			if _, err := io.CopyN(&body, r, n); err != nil {
				return 0, nil, err
			}
			r.ReadString('\n')
		}
	case length >= 0:
		if length > maxReply {
			return 0, nil, fmt.Errorf("reply too large")
		}
		body := make([]byte, length)
		_, err := io.ReadFull(r, body)
		return status, body, err
	default:
		body, err := io.ReadAll(io.LimitReader(r, maxReply))
		return status, body, err
	}
}

// decisionOutput returns what to print for Kimi: the reply, only when it
// carries a decision (hookSpecificOutput) or an instruction (message).
func decisionOutput(reply []byte) []byte {
	if string(bytes.TrimSpace(reply)) == "{}" {
		// What the adapter answers to almost every hook: no decision, no
		// instruction. Decoding it would cost more than the rest of the reply's
		// handling, and a goroutine stack growth under a held hook's frames.
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(reply, &m) != nil {
		return nil
	}
	if _, ok := m["hookSpecificOutput"]; !ok {
		if _, ok := m["message"]; !ok {
			return nil
		}
	}
	var out bytes.Buffer
	if json.Compact(&out, reply) != nil {
		return nil
	}
	return out.Bytes()
}

func (d delivery) header(reason string) spool.Header {
	return spool.Header{Delivery: d.id, At: d.at.UTC().Format(time.RFC3339Nano), Reason: reason, Pid: d.pid, PidStart: d.pidStart}
}

func (d delivery) spool(reason string, stderr io.Writer) {
	_, rec, err := spool.Append(spool.Dir(d.opts.home), d.header(reason), d.payload)
	if err != nil {
		// Nowhere left to put it: say so on stderr (Kimi logs hook stderr).
		fmt.Fprintf(stderr, "kimi-hook: could not spool payload (%s): %v\n", reason, err)
		return
	}
	d.keep(rec, stderr)
}

// keep syncs a record left in the spool, unless the sync mode is none.
func (d delivery) keep(rec string, stderr io.Writer) {
	if d.opts.sync == syncmode.None {
		return
	}
	if err := spool.Keep(rec); err != nil {
		fmt.Fprintf(stderr, "kimi-hook: %v\n", err)
	}
}

// readToken reads the hook token; a link in its place reads as no token
// (the adapter refuses to start over one too), so the payload spools.
func readToken(home string) string {
	b, err := readPrivate(filepath.Join(home, "kimi", "hook.token"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// newDeliveryID is unique per hook invocation on this machine, so the adapter
// can tell a spooled copy of a payload it already took: the read time in
// nanoseconds and the process id (no two live processes share a pid, and one
// process makes one delivery). No crypto/rand: it costs start-up time.
func newDeliveryID(t time.Time) string {
	return strconv.FormatInt(t.UnixNano(), 36) + "-" + strconv.Itoa(os.Getpid())
}
