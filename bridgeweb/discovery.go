package bridgeweb

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/procinfo"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// Instance is one record of the kap-server's instance registry,
// $KIMI_CODE_HOME/server/instances/<id>.json. It never holds the token.
type Instance struct {
	ServerID    string `json:"server_id"`
	PID         int    `json:"pid"`
	Host        string `json:"host"`
	Port        int    `json:"port"`
	StartedAt   int64  `json:"started_at"`   // Unix ms
	HeartbeatAt int64  `json:"heartbeat_at"` // Unix ms, rewritten every 15 s
	Version     string `json:"host_version,omitempty"`
	// Path is the record's file.
	Path string `json:"-"`
}

// BaseURL is the instance's REST base, e.g. http://127.0.0.1:58627.
func (in Instance) BaseURL() string {
	host := in.Host
	switch host {
	case "", "0.0.0.0", "::":
		// A server bound to every interface is reachable on loopback, and
		// loopback is where the bridge looks.
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(in.Port))
}

// Loopback reports whether the instance's host is this machine's loopback
// (or every interface, which BaseURL reaches on loopback). The host is never
// resolved: only "localhost" and loopback literals count.
func (in Instance) Loopback() bool {
	host := strings.TrimSuffix(strings.ToLower(strings.Trim(in.Host, "[]")), ".")
	switch host {
	case "", "0.0.0.0", "::", "localhost":
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// InstancesDir is the registry directory of a Kimi home.
func InstancesDir(kimiHome string) string { return filepath.Join(kimiHome, "server", "instances") }

// TokenPath is where `kimi web` keeps its bearer token in a Kimi home.
func TokenPath(kimiHome string) string { return filepath.Join(kimiHome, "server.token") }

// Skip reasons a discovery reports for records it passed over.
const (
	SkipUnreadable = "unreadable"
	SkipDeadPID    = "dead-pid"
	SkipStale      = "stale-heartbeat"
	// SkipRemote: the record names a host off this machine, where the
	// bridge would send the kap bearer token. Only an operator's
	// --allow-remote-kap lets discovery use it.
	SkipRemote = "non-loopback-host"
	// SkipLink: the record is a symbolic link (or not a regular file). The
	// registry is written by kimi web itself, never as a link; one planted
	// there could point the bridge, and its token, anywhere. Refused the
	// way every file under AEP_HOME is (safefile).
	SkipLink = "link"
	// SkipStarting: the record names no port yet. kap-server registers
	// before it listens; Kimi Code Desktop's embedded server asks for an
	// ephemeral port, so its record says port 0 until the server is bound.
	SkipStarting = "starting"
	// SkipPortTaken: the record names the port of a live server that
	// started earlier. kap-server registers the port it asked for before
	// binding, moves up when that port is taken and rewrites its record
	// then; until it does, the port is the older server's (kimi web and
	// Kimi Code Desktop share a Kimi home, and both ask for 58627).
	SkipPortTaken = "port-taken"
)

// errStarting is a record whose server has not bound its port yet.
var errStarting = errors.New("instance record names no port yet")

// Skipped is a registry record discovery passed over, and why.
type Skipped struct {
	Path, Reason string
	// Host is the record's host (SkipRemote only).
	Host string
}

// ErrNoInstance means no live kap-server is registered.
var ErrNoInstance = errors.New("no running kimi web (kap-server) registered")

// serverAlive is the default liveness of a record's server: its pid answers
// kill(pid, 0) and, where the platform can tell (procinfo), it is not a
// zombie (which kill(pid, 0) still answers for).
func serverAlive(in Instance) bool {
	if !pidAlive(in.PID) {
		return false
	}
	info, err := procinfo.Read(in.PID)
	return err != nil || !info.Exited
}

// pidLiveness turns a pid test into a record test; nil means serverAlive.
func pidLiveness(alive func(int) bool) func(Instance) bool {
	if alive == nil {
		return serverAlive
	}
	return func(in Instance) bool { return alive(in.PID) }
}

// Discover reads the instance registry and returns the newest live kap-server
// (see Scan). alive tests a pid; nil means serverAlive.
func Discover(kimiHome string, now time.Time, staleAfter time.Duration, alive func(int) bool, allowRemote bool) (Instance, []Skipped, error) {
	live, skipped, err := Scan(kimiHome, now, staleAfter, pidLiveness(alive), allowRemote)
	if err != nil {
		return Instance{}, skipped, err
	}
	if len(live) == 0 {
		return Instance{}, skipped, ErrNoInstance
	}
	return live[0], skipped, nil
}

// Scan reads the instance registry and returns every live kap-server, newest
// start first: records whose server is not alive, whose heartbeat is older
// than staleAfter, that do not parse, that are links, or (unless
// allowRemote) that name a non-loopback host are skipped (and reported),
// never deleted: the registry is the server's. A missing registry is no
// server, not an error.
func Scan(kimiHome string, now time.Time, staleAfter time.Duration, alive func(Instance) bool, allowRemote bool) ([]Instance, []Skipped, error) {
	if alive == nil {
		alive = serverAlive
	}
	dir := InstancesDir(kimiHome)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("instance registry: %w", err)
	}
	var live []Instance
	var skipped []Skipped
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		in, err := readInstance(path)
		switch {
		case errors.Is(err, safefile.ErrLink) || errors.Is(err, safefile.ErrNotRegular):
			skipped = append(skipped, Skipped{Path: path, Reason: SkipLink})
		case errors.Is(err, errStarting):
			skipped = append(skipped, Skipped{Path: path, Reason: SkipStarting})
		case err != nil:
			skipped = append(skipped, Skipped{Path: path, Reason: SkipUnreadable})
		case !allowRemote && !in.Loopback():
			skipped = append(skipped, Skipped{Path: path, Reason: SkipRemote, Host: in.Host})
		case !alive(in):
			skipped = append(skipped, Skipped{Path: path, Reason: SkipDeadPID})
		case staleAfter > 0 && now.Sub(time.UnixMilli(in.HeartbeatAt)) > staleAfter:
			// A live pid with a stopped heartbeat: a recycled pid, or a
			// server that hung. Either way not one to connect to.
			skipped = append(skipped, Skipped{Path: path, Reason: SkipStale})
		default:
			live = append(live, in)
		}
	}
	live, taken := ownPorts(live)
	skipped = append(skipped, taken...)
	// The newest start first: after a restart an old record may linger for
	// a moment until its process is gone.
	sort.Slice(live, func(i, j int) bool {
		if live[i].StartedAt != live[j].StartedAt {
			return live[i].StartedAt > live[j].StartedAt
		}
		return live[i].ServerID < live[j].ServerID
	})
	return live, skipped, nil
}

// ownPorts keeps one live record per address: the one whose server started
// first, which is the server listening there; a later one naming the same
// address is a server still starting (SkipPortTaken).
func ownPorts(live []Instance) ([]Instance, []Skipped) {
	sort.Slice(live, func(i, j int) bool {
		if live[i].StartedAt != live[j].StartedAt {
			return live[i].StartedAt < live[j].StartedAt
		}
		if live[i].ServerID != live[j].ServerID {
			return live[i].ServerID < live[j].ServerID
		}
		return live[i].Path < live[j].Path
	})
	owned := map[string]bool{}
	kept := live[:0]
	var taken []Skipped
	for _, in := range live {
		if addr := in.BaseURL(); !owned[addr] {
			owned[addr] = true
			kept = append(kept, in)
			continue
		}
		taken = append(taken, Skipped{Path: in.Path, Reason: SkipPortTaken})
	}
	return kept, taken
}

// maxInstanceFile bounds a registry record (real ones are ~170 bytes).
const maxInstanceFile = 64 << 10

// readInstance reads one record without following a link (safefile).
func readInstance(path string) (Instance, error) {
	f, err := safefile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return Instance{}, err
	}
	defer f.Close()
	var in Instance
	dec := json.NewDecoder(&limitedReader{f: f, n: maxInstanceFile})
	if err := dec.Decode(&in); err != nil {
		return Instance{}, fmt.Errorf("%s: %w", path, err)
	}
	if in.PID > 0 && in.Port == 0 && in.ServerID != "" && in.StartedAt > 0 {
		return Instance{}, fmt.Errorf("%s: %w", path, errStarting)
	}
	if in.PID <= 0 || in.Port <= 0 || in.Port > 65535 {
		return Instance{}, fmt.Errorf("%s: missing pid or port", path)
	}
	in.Path = path
	return in, nil
}

// key names one server run: its record plus the pid, port and start it
// announced (a record rewritten for another run is another instance).
func (in Instance) key() string {
	return fmt.Sprintf("%s|%d|%d|%d", in.Path, in.PID, in.Port, in.StartedAt)
}

type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("instance record too large")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}

// readToken reads a bearer token file. The token is never logged: errors name
// the file only.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("kap token %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("kap token %s is empty", path)
	}
	if strings.ContainsAny(tok, " \t\r\n,") {
		return "", fmt.Errorf("kap token %s is not a single token", path)
	}
	return tok, nil
}

// endpoint is where one connection attempt goes.
type endpoint struct {
	base  string // REST base URL, no trailing slash
	ws    string // WebSocket URL
	token string
	// instance is the registry record it came from (zero with a fixed URL).
	instance Instance
}

func newEndpoint(base, token string) (endpoint, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(base), "/"))
	if err != nil || u.Host == "" {
		return endpoint{}, fmt.Errorf("kap URL %q is not an absolute URL", base)
	}
	wsScheme := "ws"
	switch u.Scheme {
	case "http":
	case "https":
		wsScheme = "wss"
	default:
		return endpoint{}, fmt.Errorf("kap URL scheme %q is not http or https", u.Scheme)
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	ep := endpoint{base: u.String(), token: token}
	u.Scheme = wsScheme
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/ws"
	ep.ws = u.String()
	return ep, nil
}
