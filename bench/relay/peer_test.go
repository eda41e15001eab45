package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The CPU time counts from the last ')', so a command name with spaces and
// brackets does not shift the fields; a line without one is an error.
func TestStatCPU(t *testing.T) {
	line := "4242 (cent (x) y) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 75 0 0 20 0 9 0 100 1000 50 0 0\n"
	got, err := statCPU([]byte(line))
	if err != nil || got != 3250*time.Millisecond {
		t.Fatalf("statCPU = %v, %v; want 3.25s (325 ticks of 10 ms)", got, err)
	}
	for _, bad := range []string{"", "4242 cent S 1", "1 (a) S 1 2 3", "1 (a) S 1 2 3 4 5 6 7 8 9 10 x 5"} {
		if _, err := statCPU([]byte(bad)); err == nil {
			t.Errorf("statCPU(%q): no error", bad)
		}
	}
}

// Each NDJSON line becomes one publication, in order, in a body that is
// JSON.
func TestPublishBatch(t *testing.T) {
	b := publishBatch(nil, `load-"1"`, []byte("{\"seq\":1}\n{\"seq\":2}\n"))
	var got struct {
		Commands []struct {
			Publish struct {
				Channel string
				Data    struct{ Seq int }
			}
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if len(got.Commands) != 2 || got.Commands[0].Publish.Data.Seq != 1 || got.Commands[1].Publish.Data.Seq != 2 ||
		got.Commands[1].Publish.Channel != `load-"1"` {
		t.Fatalf("publishBatch = %s", b)
	}
}

// The token is signed with the key and names the channel.
func TestConnectToken(t *testing.T) {
	tok := connectToken("k", "load-1")
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q: %d parts", tok, len(parts))
	}
	m := hmac.New(sha256.New, []byte("k"))
	m.Write([]byte(parts[0] + "." + parts[1]))
	if base64.RawURLEncoding.EncodeToString(m.Sum(nil)) != parts[2] {
		t.Fatal("signature does not verify")
	}
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c struct{ Channels []string }
	if err := json.Unmarshal(claims, &c); err != nil || len(c.Channels) != 1 || c.Channels[0] != "load-1" {
		t.Fatalf("claims %s: %v", claims, err)
	}
}

// The server listens on the given loopback address alone and reports
// nowhere.
func TestCentrifugoConfig(t *testing.T) {
	b, err := centrifugoConfig("127.0.0.1:18000", "tk", "ak")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		HTTPServer struct {
			Address string
			Port    int
		} `json:"http_server"`
		UsageStats struct{ Disabled bool } `json:"usage_stats"`
		HTTPAPI    struct{ Key string }    `json:"http_api"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.HTTPServer.Address != "127.0.0.1" || c.HTTPServer.Port != 18000 || !c.UsageStats.Disabled || c.HTTPAPI.Key != "ak" {
		t.Fatalf("config %s", b)
	}
	if _, err := centrifugoConfig("nowhere", "tk", "ak"); err == nil {
		t.Fatal("an address without a port: no error")
	}
}
