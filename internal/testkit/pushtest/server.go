// Package pushtest is a Web Push service for tests: it hands out
// subscriptions whose keys it holds, accepts push requests on a loopback port
// the way a push service does (RFC 8030 §5), checks their VAPID authorization
// (RFC 8292) and decrypts their aes128gcm payloads (RFC 8291), so a test
// reads the plaintext an application server sent. It can answer 404 or 410
// (a subscription gone) or hold requests (a push service that stalls).
package pushtest

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"
)

// maxBody is the largest push message body accepted; a push service must
// take 4096 octets (RFC 8030 §7.2) and the big ones take no more.
const maxBody = 4096

// Subscription is one user agent's push subscription: the endpoint the
// application server posts to and the keys the user agent published, with
// the private halves kept here to decrypt.
type Subscription struct {
	ID       string
	Endpoint string
	P256dh   string // base64url, uncompressed P-256 point
	Auth     string // base64url, 16 bytes
	// ServerKey, when set, is the only application server key (base64url)
	// whose pushes are accepted: the applicationServerKey the subscription
	// was made with (RFC 8292 §4.2); others are refused with 403.
	ServerKey string

	key  *ecdh.PrivateKey
	auth []byte
}

// JSON is the subscription as the browser's PushSubscription.toJSON() gives
// it to the page.
func (s *Subscription) JSON() []byte {
	b, _ := json.Marshal(map[string]any{
		"endpoint":       s.Endpoint,
		"expirationTime": nil,
		"keys":           map[string]string{"p256dh": s.P256dh, "auth": s.Auth},
	})
	return b
}

// Message is one push request the service accepted.
type Message struct {
	Subscription string
	Plaintext    []byte
	TTL          int
	Urgency      string // "" when the header was absent
	Topic        string
	VAPID        VAPID
}

// Refusal is a push request the service refused, with its reason.
type Refusal struct {
	Subscription string
	Status       int
	Reason       string
}

// Server is the push service. Its zero value is not usable: call New.
type Server struct {
	URL string

	srv      *httptest.Server
	released chan struct{}
	now      func() time.Time

	mu       sync.Mutex
	subs     map[string]*subState
	refusals []Refusal
	seq      int
}

type subState struct {
	sub      *Subscription
	status   int // 0 accepts
	stall    bool
	requests int
	msgs     []Message
	arrived  chan struct{} // closed and replaced on each message
}

// New starts a push service on a loopback port, stopped when the test ends.
func New(tb testing.TB) *Server {
	s := &Server{released: make(chan struct{}), now: time.Now, subs: map[string]*subState{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /push/{id}", s.push)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	tb.Cleanup(s.Close)
	return s
}

// Allow is the prefix a relay must allow push services at for this one
// (notify.Config.PushServiceAllow): the relay pushes only to public
// addresses otherwise.
func (s *Server) Allow() []netip.Prefix {
	ap := netip.MustParseAddrPort(s.srv.Listener.Addr().String())
	return []netip.Prefix{netip.PrefixFrom(ap.Addr(), ap.Addr().BitLen())}
}

// Env is Allow as the environment of an aep-kimi process
// (AEP_NOTIFY_PUSH_ALLOW=...).
func (s *Server) Env() string {
	return "AEP_NOTIFY_PUSH_ALLOW=" + s.Allow()[0].String()
}

// Close releases stalled requests and stops the service.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.released:
	default:
		close(s.released)
	}
	s.mu.Unlock()
	s.srv.Close()
}

// Subscribe makes a new subscription with fresh keys; serverKey, when not
// empty, restricts it to that application server key.
func (s *Server) Subscribe(serverKey string) (*Subscription, error) {
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate user agent key: %w", err)
	}
	auth := make([]byte, authLen)
	if _, err := rand.Read(auth); err != nil {
		return nil, fmt.Errorf("generate auth secret: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(auth[:9])
	sub := &Subscription{
		ID:        id,
		Endpoint:  s.URL + "/push/" + id,
		P256dh:    base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()),
		Auth:      base64.RawURLEncoding.EncodeToString(auth),
		ServerKey: serverKey,
		key:       key,
		auth:      auth,
	}
	s.mu.Lock()
	s.subs[id] = &subState{sub: sub, arrived: make(chan struct{})}
	s.mu.Unlock()
	return sub, nil
}

// Answer makes the service answer every later push to sub with status
// without reading it: 404 or 410 say the subscription is gone (RFC 8030
// §7.3), 429 or 5xx that the service is busy. Zero accepts again.
func (s *Server) Answer(sub *Subscription, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.subs[sub.ID]; st != nil {
		st.status = status
	}
}

// Stall makes the service hold every later push to sub until its sender
// gives up or the service closes; false answers normally again.
func (s *Server) Stall(sub *Subscription, stall bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.subs[sub.ID]; st != nil {
		st.stall = stall
	}
}

// Requests counts the push requests for sub so far, accepted or not.
func (s *Server) Requests(sub *Subscription) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.subs[sub.ID]; st != nil {
		return st.requests
	}
	return 0
}

// Messages returns the pushes accepted for sub so far, oldest first.
func (s *Server) Messages(sub *Subscription) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.subs[sub.ID]; st != nil {
		return append([]Message(nil), st.msgs...)
	}
	return nil
}

// Next waits for the accepted push to sub after the first n (Next(ctx,
// sub, 0) is the first) and returns it.
func (s *Server) Next(ctx context.Context, sub *Subscription, n int) (Message, error) {
	for {
		s.mu.Lock()
		st := s.subs[sub.ID]
		if st == nil {
			s.mu.Unlock()
			return Message{}, fmt.Errorf("unknown subscription %s", sub.ID)
		}
		if len(st.msgs) > n {
			m := st.msgs[n]
			s.mu.Unlock()
			return m, nil
		}
		arrived := st.arrived
		s.mu.Unlock()
		select {
		case <-arrived:
		case <-ctx.Done():
			return Message{}, fmt.Errorf("waiting for push %d to %s: %w", n+1, sub.ID, ctx.Err())
		}
	}
}

// Refusals returns the push requests refused for being malformed,
// unauthorized or undecryptable, oldest first.
func (s *Server) Refusals() []Refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Refusal(nil), s.refusals...)
}

func (s *Server) push(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	st := s.subs[id]
	var status int
	var stall bool
	if st != nil {
		st.requests++
		status, stall = st.status, st.stall
	}
	s.mu.Unlock()
	if st == nil {
		http.Error(w, "no such subscription", http.StatusNotFound)
		return
	}
	if stall {
		select {
		case <-r.Context().Done():
		case <-s.released:
		}
		return
	}
	if status != 0 {
		http.Error(w, http.StatusText(status), status)
		return
	}
	m, code, err := s.read(r, st.sub)
	if err != nil {
		s.mu.Lock()
		s.refusals = append(s.refusals, Refusal{Subscription: id, Status: code, Reason: err.Error()})
		s.mu.Unlock()
		http.Error(w, err.Error(), code)
		return
	}
	s.mu.Lock()
	s.seq++
	n := s.seq
	st.msgs = append(st.msgs, m)
	close(st.arrived)
	st.arrived = make(chan struct{})
	s.mu.Unlock()
	w.Header().Set("Location", s.URL+"/message/"+strconv.Itoa(n))
	w.WriteHeader(http.StatusCreated)
}

// read checks one push request as a push service would and decrypts it; the
// int is the status a refusal is answered with.
func (s *Server) read(r *http.Request, sub *Subscription) (Message, int, error) {
	m := Message{Subscription: sub.ID, Urgency: r.Header.Get("Urgency"), Topic: r.Header.Get("Topic")}
	ttl, err := strconv.Atoi(r.Header.Get("TTL"))
	if err != nil || ttl < 0 {
		return m, http.StatusBadRequest, fmt.Errorf("TTL header %q is not a non-negative integer (RFC 8030 §5.2)", r.Header.Get("TTL"))
	}
	m.TTL = ttl
	switch m.Urgency {
	case "", "very-low", "low", "normal", "high":
	default:
		return m, http.StatusBadRequest, fmt.Errorf("urgency %q is not one of RFC 8030 §5.3's", m.Urgency)
	}
	v, err := VerifyVAPID(r.Header.Get("Authorization"), sub.Endpoint, s.now())
	if err != nil {
		return m, http.StatusUnauthorized, fmt.Errorf("vapid: %w", err)
	}
	m.VAPID = v
	if sub.ServerKey != "" && v.Key != sub.ServerKey {
		return m, http.StatusForbidden, fmt.Errorf("vapid key %s is not the subscription's application server key", v.Key)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return m, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	if len(body) > maxBody {
		return m, http.StatusRequestEntityTooLarge, fmt.Errorf("body exceeds %d bytes", maxBody)
	}
	if len(body) == 0 {
		return m, 0, nil
	}
	if ce := r.Header.Get("Content-Encoding"); ce != "aes128gcm" {
		return m, http.StatusUnsupportedMediaType, fmt.Errorf("content encoding %q, want aes128gcm (RFC 8291 §4)", ce)
	}
	plain, err := Decrypt(sub.key, sub.auth, body)
	if err != nil {
		return m, http.StatusBadRequest, fmt.Errorf("decrypt: %w", err)
	}
	m.Plaintext = plain
	return m, 0, nil
}
