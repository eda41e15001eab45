// Package httpcall is a test's HTTP call: one request, its answer's status,
// header and whole body, and the body decoded as JSON, failing the test on
// a transport error or on a body that is not the JSON asked for. (The
// terminal tools' calls to the relay's APIs are internal/apicall's; this is
// the tests' side, which also needs the status and body of a refusal.)
package httpcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// Request is one call.
type Request struct {
	// Method is the HTTP method; "" is GET.
	Method string
	URL    string
	// Token is sent as a bearer token; "" sends none.
	Token string
	// Body is nil (none), []byte or string (sent as is), or anything
	// else, sent as JSON with its Content-Type.
	Body any
	// Header sets headers after Token and Body: "Host" sets the request's
	// Host, an empty value removes the header.
	Header map[string]string
}

// Response is what came back.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do makes the call with the default client and reads the whole answer,
// failing the test when there is none.
func Do(t testing.TB, r Request) Response {
	t.Helper()
	resp, err := Try(r)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Try is Do for a caller that reads a failed call as an answer itself (a
// daemon that is down reads as none live).
func Try(r Request) (Response, error) {
	var body io.Reader
	ctype := ""
	switch b := r.Body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	case string:
		body = bytes.NewReader([]byte(b))
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return Response{}, fmt.Errorf("encode the request body: %w", err)
		}
		body, ctype = bytes.NewReader(js), "application/json"
	}
	req, err := http.NewRequest(r.Method, r.URL, body)
	if err != nil {
		return Response{}, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	for k, v := range r.Header {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", req.Method, r.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: read the answer: %w", req.Method, r.URL, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Cookies are the cookies the answer sets.
func (r Response) Cookies() []*http.Cookie {
	return (&http.Response{Header: r.Header}).Cookies()
}

// Get is Do of a GET with token.
func Get(t testing.TB, url, token string) Response {
	t.Helper()
	return Do(t, Request{URL: url, Token: token})
}

// Want fails the test unless the answer has status.
func (r Response) Want(t testing.TB, status int) Response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("HTTP %d, want %d: %s", r.Status, status, r.Body)
	}
	return r
}

// JSON decodes the body into v, failing the test when it is not JSON of
// v's shape.
func (r Response) JSON(t testing.TB, v any) Response {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("HTTP %d body is not the JSON expected (%v): %s", r.Status, err, r.Body)
	}
	return r
}

// Map is the body as a JSON object.
func (r Response) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}
