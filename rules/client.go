package rules

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultClientTimeout bounds one API call.
const DefaultClientTimeout = 15 * time.Second

// Client calls a relay's rules API.
type Client struct {
	// Base is the relay's base URL; Token its bearer token.
	Base, Token string
	// HTTP is the client used: its transport, and its timeout when set,
	// else DefaultClientTimeout; nil means a default client.
	HTTP *http.Client
}

// APIError is the relay's refusal: its status and JSON error.
type APIError struct {
	Status int
	Code   string `json:"error"`
	Detail string `json:"detail"`
}

func (e *APIError) Error() string {
	if e.Detail != "" {
		return e.Detail
	}
	if e.Code != "" {
		return fmt.Sprintf("%s (HTTP %d)", e.Code, e.Status)
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

// ErrNoRulesAPI means the relay serves no rules (an older relay, or one
// started without a home for them).
var ErrNoRulesAPI = errors.New("this relay serves no rules")

// List returns the rules in force with their use.
func (c Client) List(ctx context.Context) (Listing, error) {
	var out Listing
	err := c.call(ctx, http.MethodGet, APIPath, nil, &out)
	return out, err
}

// Add adds r and returns it as stored.
func (c Client) Add(ctx context.Context, r Rule) (Rule, error) {
	var out struct{ Rule Rule }
	err := c.call(ctx, http.MethodPost, APIPath, r, &out)
	return out.Rule, err
}

// Remove deletes the rule with id and returns it.
func (c Client) Remove(ctx context.Context, id string) (Rule, error) {
	var out struct{ Removed Rule }
	err := c.call(ctx, http.MethodDelete, APIPath+"/"+url.PathEscape(id), nil, &out)
	return out.Removed, err
}

// Test asks which rule would decide the request p describes.
func (c Client) Test(ctx context.Context, p Probe) (Verdict, error) {
	var out struct{ Verdict Verdict }
	err := c.call(ctx, http.MethodPost, APIPath+"/test", p, &out)
	return out.Verdict, err
}

func (c Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, body)
	if err != nil {
		return fmt.Errorf("relay URL: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := &http.Client{Timeout: DefaultClientTimeout}
	if c.HTTP != nil {
		hc = &http.Client{Transport: c.HTTP.Transport, Timeout: cmp.Or(c.HTTP.Timeout, DefaultClientTimeout)}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxFileBytes+maxAPIBody))
	if err != nil {
		return fmt.Errorf("read the relay's answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		e := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(b, e) != nil || e.Code == "" {
			e.Code = ""
		}
		if resp.StatusCode == http.StatusNotFound && e.Code != CodeNotFound {
			return ErrNoRulesAPI
		}
		return e
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("the relay's answer is not what the rules API sends: %w", err)
	}
	return nil
}
