package station

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
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

// relayPublisher builds the relay publisher a source publishes with and sets it
// as the source's publisher (unless the link's URL is none); the source runs it
// (emitter.Core.Run). The relay's commands go to the source bind names
// once it is built, before it runs.
func relayPublisher(cfg *emitter.Config, link relayLink, h sourceHello, log *slog.Logger) (bind func(emitter.Emitter), err error) {
	var target emitter.Emitter
	host, _ := os.Hostname()
	relayURL := link.url
	em, err := client.NewPublisher(client.PublisherConfig{
		URL:        relayURL,
		Token:      link.token,
		HTTPClient: link.http,
		Agent:      mapping.Agent,
		Instance:   fmt.Sprintf("%s/%s/%d", host, h.role, os.Getpid()),
		Emits:      h.emits,
		Capture:    []string{"none", "metadata", "redacted"},
		Control:    h.control,
		Logger:     log.With("component", "publisher"),
		// Commands flow only while the source runs, after bind.
		OnCommand: func(ctx context.Context, ev *aep.Event) { target.HandleCommand(ctx, ev) },
	})
	if err != nil {
		return nil, fmt.Errorf("relay publisher: %w", err)
	}
	if !client.IsNone(relayURL) {
		cfg.Publisher = publisherStatus{em}
		cfg.Collectors = append(cfg.Collectors, em.Collector(h.metrics))
	}
	return func(e emitter.Emitter) { target = e }, nil
}

// withRelayPublisher builds a source with build once cfg has the relay
// emitter it publishes with, and binds the relay's commands to it.
func withRelayPublisher[S emitter.Emitter](cfg *emitter.Config, link relayLink, h sourceHello, log *slog.Logger, build func() (S, error)) (S, error) {
	var none S
	bind, err := relayPublisher(cfg, link, h, log)
	if err != nil {
		return none, err
	}
	src, err := build()
	if err != nil {
		return none, err
	}
	bind(src)
	return src, nil
}

// publisherStatus lets a source report the relay publisher's health
// (journal.PublisherStatus) and run it (emitter.Runner).
type publisherStatus struct{ *client.Publisher }

func (p publisherStatus) State() string    { return string(p.Publisher.State()) }
func (p publisherStatus) OutboxDepth() int { return p.Stats().Outbox }
func (p publisherStatus) Drops() uint64    { return p.Stats().Dropped }
