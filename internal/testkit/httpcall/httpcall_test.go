package httpcall

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestDo(t *testing.T) {
	var got struct{ method, auth, ctype, host, body string }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.auth, got.ctype, got.host, got.body = r.Method, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), r.Host, string(b)
		w.Header().Set("X-Seen", "1")
		if r.URL.Path == "/refused" {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":"forbidden"}`)
			return
		}
		_, _ = io.WriteString(w, `{"n":7}`)
	}))
	defer srv.Close()

	var out struct{ N int }
	r := Do(t, Request{Method: http.MethodPost, URL: srv.URL + "/ok", Token: "tok", Body: map[string]int{"a": 1},
		Header: map[string]string{"Host": "relay.test"}}).Want(t, http.StatusOK).JSON(t, &out)
	if out.N != 7 || r.Header.Get("X-Seen") != "1" {
		t.Fatalf("answer %+v %v", out, r.Header)
	}
	if got.method != http.MethodPost || got.auth != "Bearer tok" || got.ctype != "application/json" || got.body != `{"a":1}` || got.host != "relay.test" {
		t.Fatalf("request %+v", got)
	}
	Do(t, Request{URL: srv.URL, Token: "tok", Body: "raw", Header: map[string]string{"Authorization": ""}})
	if got.method != http.MethodGet || got.auth != "" || got.ctype != "" || got.body != "raw" {
		t.Fatalf("a bare GET with a raw body: %+v", got)
	}
	if m := Get(t, srv.URL+"/refused", "").Want(t, http.StatusForbidden).Map(t); m["error"] != "forbidden" {
		t.Fatalf("refusal %v", m)
	}
}
