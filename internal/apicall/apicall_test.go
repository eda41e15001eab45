package apicall

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestDo(t *testing.T) {
	var got struct{ auth, ctype, body string }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.auth, got.ctype, got.body = r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(b)
		switch r.URL.Path {
		case "/ok":
			_, _ = io.WriteString(w, `{"n":7}`)
		case "/refused":
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":"forbidden","detail":"needs the admin role"}`)
		case "/html":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, `<html>proxy</html>`)
		case "/big":
			_, _ = io.WriteString(w, `{"n":`+strings.Repeat("1", 100)+`}`)
		case "/slow":
			<-r.Context().Done() // answers nothing until the client gives up
		}
	}))
	defer srv.Close()
	c := Call{Base: srv.URL + "/", Token: "tok", Timeout: 5 * time.Second, Limit: 64, API: "the test API"}
	ctx := context.Background()

	var out struct{ N int }
	if err := c.Do(ctx, http.MethodPost, "/ok", map[string]int{"a": 1}, &out); err != nil || out.N != 7 {
		t.Fatalf("ok: %v %+v", err, out)
	}
	if got.auth != "Bearer tok" || got.ctype != "application/json" || got.body != `{"a":1}` {
		t.Fatalf("request: %+v", got)
	}
	if err := (Call{Base: srv.URL, Timeout: time.Second, Limit: 64}).Do(ctx, http.MethodGet, "/ok", nil, nil); err != nil || got.auth != "" || got.ctype != "" {
		t.Fatalf("no token, no body: %v %+v", err, got)
	}

	var e *Error
	err := c.Do(ctx, http.MethodGet, "/refused", nil, &out)
	if !errors.As(err, &e) || e.Status != 403 || e.Code != "forbidden" || err.Error() != "needs the admin role" {
		t.Fatalf("refused: %#v", err)
	}
	err = c.Do(ctx, http.MethodGet, "/html", nil, &out)
	if !errors.As(err, &e) || e.Code != "" || err.Error() != "HTTP 502" {
		t.Fatalf("not the relay's JSON: %#v", err)
	}
	if err := c.Do(ctx, http.MethodGet, "/big", nil, &out); err == nil || !strings.Contains(err.Error(), "the test API") {
		t.Fatalf("an answer past Limit is cut, so it does not decode: %v", err)
	}
	slow := c
	slow.HTTP = &http.Client{Timeout: 50 * time.Millisecond}
	if err := slow.Do(ctx, http.MethodGet, "/slow", nil, nil); err == nil {
		t.Fatal("the client's own timeout wins over Timeout")
	}
}
