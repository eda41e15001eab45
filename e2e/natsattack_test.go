package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/relay"
)

// NatsAttacker tries what another local user or process can do against a
// NATS listener: connect with opts and, if that works, read the stream,
// Store forged events and route forged commands. Each attempt reports
// whether the NATS let it through.
type NatsAttacker struct {
	Nc *nats.Conn
	Js jetstream.JetStream
	// refused collects the errors the NATS reported (permission violations).
	Refused syncbuf.Buffer
}

func AttackNATS(t *testing.T, url string, opts ...nats.Option) (*NatsAttacker, error) {
	a := &NatsAttacker{}
	opts = append(opts, nats.Timeout(5*time.Second), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		fmt.Fprintln(&a.Refused, err)
	}))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	a.Nc = nc
	a.Js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return a, nil
}

// ReadStream asks the stream for its first stored event.
func (a *NatsAttacker) ReadStream() bool {
	resp, err := a.Nc.Request("$JS.API.STREAM.MSG.GET."+relay.DefaultStream, []byte(`{"seq":1}`), 2*time.Second)
	return err == nil && strings.Contains(string(resp.Data), `"message"`)
}

// Store publishes ev to the stream on subject and reports whether the stream
// acknowledged it.
func (a *NatsAttacker) Store(subject string, ev *aep.Event) bool {
	b, _ := json.Marshal(ev)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := a.Js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: b, Header: nats.Header{"Aep-Relay": {"forged"}}})
	return err == nil
}

// Route sends cmd on a route subject as a relay would and reports whether a
// relay answered that it was delivered.
func (a *NatsAttacker) Route(subject string, cmd *aep.Event) bool {
	b, _ := json.Marshal(cmd)
	resp, err := a.Nc.RequestMsg(&nats.Msg{Subject: subject, Data: b, Header: nats.Header{"Aep-Relay": {"forged"}}}, time.Second)
	return err == nil && !strings.Contains(string(resp.Data), `"code"`)
}

// NatsInfo reads the INFO a NATS listener greets a client with.
func NatsInfo(t *testing.T, addr string) map[string]any {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	info := map[string]any{}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info); err != nil {
		t.Fatalf("INFO %q: %v", line, err)
	}
	return info
}

func MustSeed(t *testing.T, kp nkeys.KeyPair) []byte {
	t.Helper()
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return seed
}
