package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultClientTimeout bounds one API call; a test waits for every target
// (each bounded by SendTimeout) first.
const DefaultClientTimeout = SendTimeout + 5*time.Second

// Client calls a relay's notification API (aep-kimi notify).
type Client struct {
	// Base is the relay's base URL; Token its bearer token.
	Base, Token string
	// HTTP is the client used; nil means one with DefaultClientTimeout.
	HTTP *http.Client
}

// APIError is the relay's refusal: its status and JSON error.
type APIError struct {
	Status int
	Code   string `json:"error"`
	Detail string `json:"detail"`
}

func (e *APIError) Error() string {
	switch {
	case e.Status == http.StatusNotFound && e.Code == "":
		return "this relay serves no notifications (an older relay, or one without a token)"
	case e.Detail != "":
		return e.Detail
	}
	return fmt.Sprintf("%s (HTTP %d)", e.Code, e.Status)
}

// List returns the subscriptions the token's person may see.
func (c Client) List(ctx context.Context) (Listing, error) {
	var out Listing
	return out, c.call(ctx, http.MethodGet, PathSubscriptions, &out)
}

// Remove deletes subscription id.
func (c Client) Remove(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, PathSubscriptions+"/"+url.PathEscape(id), nil)
}

// Test has the relay send a test message to each target and device.
func (c Client) Test(ctx context.Context) (TestReport, error) {
	var out TestReport
	return out, c.call(ctx, http.MethodPost, PathTest, &out)
}

func (c Client) call(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("relay URL: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: DefaultClientTimeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read the relay's answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		e := &APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(b, e) // a body that is not the relay's JSON leaves the status to speak
		if e.Code == "not-found" && resp.StatusCode == http.StatusNotFound && !strings.HasPrefix(path, PathSubscriptions+"/") {
			e.Code, e.Detail = "", ""
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("the relay's answer is not what the notification API sends: %w", err)
	}
	return nil
}
