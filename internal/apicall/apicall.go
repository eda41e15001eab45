// Package apicall is the one way the terminal tools call a relay's JSON
// APIs (rules, notifications): a bearer token, a JSON body, a bounded
// answer, and the relay's refusal as an *Error.
package apicall

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Error is the relay's refusal: its status and JSON error body.
type Error struct {
	Status int
	Code   string `json:"error"`
	Detail string `json:"detail"`
}

func (e *Error) Error() string {
	switch {
	case e.Detail != "":
		return e.Detail
	case e.Code != "":
		return fmt.Sprintf("%s (HTTP %d)", e.Code, e.Status)
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

// Call is one request to a relay's API.
type Call struct {
	// Base is the relay's base URL; Token its bearer token ("" sends none).
	Base, Token string
	// HTTP supplies the transport, and the timeout when it sets one;
	// nil means the default transport.
	HTTP *http.Client
	// Timeout bounds the call when HTTP sets none.
	Timeout time.Duration
	// Limit bounds the answer read, in bytes.
	Limit int64
	// API names the API in errors ("the rules API").
	API string
}

// Do sends in as JSON (nil: no body) to method path, and decodes a
// success into out (nil: the answer is not read). A status of 300 or more
// is an *Error, with Code and Detail left empty when the answer is not the
// relay's JSON.
func (c Call) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode the request: %w", err)
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
	hc := &http.Client{Timeout: c.Timeout}
	if c.HTTP != nil {
		hc = &http.Client{Transport: c.HTTP.Transport, Timeout: cmp.Or(c.HTTP.Timeout, c.Timeout)}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.Limit))
	if err != nil {
		return fmt.Errorf("read the relay's answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode}
		if json.Unmarshal(b, e) != nil {
			e.Code, e.Detail = "", "" // not the relay's JSON: the status speaks
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("the relay's answer is not what %s sends: %w", c.API, err)
	}
	return nil
}
