package station

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Every URL is asked and reported; one answering other than 200, or not at
// all, makes the whole check fail; a URL that cannot be asked is an error.
func TestCheckHealth(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer up.Close()
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer sick.Close()
	var out bytes.Buffer
	if ok, err := CheckHealth(context.Background(), time.Second, nil, []string{up.URL}, &out); !ok || err != nil || !strings.Contains(out.String(), ": 200 ok") {
		t.Fatalf("healthy: %v %v %q", ok, err, out.String())
	}
	out.Reset()
	ok, err := CheckHealth(context.Background(), time.Second, nil, []string{sick.URL, up.URL}, &out)
	if ok || err != nil || strings.Count(out.String(), "\n") != 2 {
		t.Fatalf("one sick: %v %v %q", ok, err, out.String())
	}
	if _, err := CheckHealth(context.Background(), time.Second, nil, []string{"://bad"}, &out); err == nil {
		t.Fatal("a URL that cannot be asked passed")
	}
}
