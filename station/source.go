package station

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// sourceHello is what a source of sessions (the adapter, the bridge)
// declares to the relay.
type sourceHello struct {
	// role names it in the hello's instance ("adapter", "bridge-web");
	// metrics is the namespace of the relay publisher's metrics on its
	// /metrics ("aepkimi_adapter").
	role, metrics string
	// emits is declared when set.
	emits []string
	// control is declared when set: the commands accepted, nothing when
	// control is off, so the relay refuses commands on the source's behalf.
	control *wire.Control
}

// helloControl is a control declaration: the types accepted and the ack
// window (zero: the default every source uses).
func helloControl(accepts []string, ackWindow time.Duration) *wire.Control {
	return &wire.Control{Accepts: accepts, AckWindowMS: int(cmp.Or(ackWindow, emitter.DefaultAckWindow).Milliseconds())}
}

// relayLink is how a source reaches its relay: the URL (or none), the
// token, and the HTTP client (nil: the default, the system's roots).
type relayLink struct {
	url, token string
	http       *http.Client
}

// newRelayLink is the link to url: through hc when set, else a client
// trusting caFile besides the system's roots.
func newRelayLink(url, token string, hc *http.Client, caFile string) (relayLink, error) {
	if hc == nil {
		var err error
		if hc, err = tlsconf.HTTPClient(caFile); err != nil {
			return relayLink{}, err
		}
	}
	return relayLink{url: url, token: token, http: hc}, nil
}

// relayPublisher builds the relay publisher a source publishes with and
// sets it as the source's publisher (unless the link's URL is none). The
// source's core runs it (emitter.Core.Run) and hands it the core's
// HandleCommand, so the relay's commands go straight to the source.
func relayPublisher(cfg *emitter.Config, link relayLink, h sourceHello, log *slog.Logger) error {
	host, _ := os.Hostname()
	pub, err := client.NewPublisher(client.PublisherConfig{
		URL:        link.url,
		Token:      link.token,
		HTTPClient: link.http,
		Agent:      mapping.Agent,
		Instance:   fmt.Sprintf("%s/%s/%d", host, h.role, os.Getpid()),
		Emits:      h.emits,
		Capture:    []string{"none", "metadata", "redacted"},
		Control:    h.control,
		Logger:     log.With("component", "publisher"),
	})
	if err != nil {
		return fmt.Errorf("relay publisher: %w", err)
	}
	if !client.IsNone(link.url) {
		cfg.Publisher = publisherStatus{pub}
		cfg.Collectors = append(cfg.Collectors, pub.Collector(h.metrics))
	}
	return nil
}

// publisherStatus lets a source report the relay publisher's health
// (journal.PublisherStatus) and run it (emitter.Runner).
type publisherStatus struct{ *client.Publisher }

func (p publisherStatus) State() string    { return string(p.Publisher.State()) }
func (p publisherStatus) OutboxDepth() int { return p.Stats().Outbox }
func (p publisherStatus) Drops() uint64    { return p.Stats().Dropped }
