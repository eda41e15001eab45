package station

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// healthBodyLimit is how much of a /healthz answer is printed.
const healthBodyLimit = 4096

// DefaultHealthURLs are the relay's and the adapter's /healthz on their
// usual local ports.
func DefaultHealthURLs() []string {
	return []string{"http://127.0.0.1:8787/healthz", "http://127.0.0.1:8398/healthz"}
}

// CheckHealth asks each URL, each within timeout, through hc (nil: the
// default client; an https relay's CA: tlsconf.HTTPClient), and writes its
// answer (or why it is down) on w: ok is false when one is down or answers
// other than 200. An error is a URL that cannot be asked at all.
func CheckHealth(ctx context.Context, timeout time.Duration, hc *http.Client, urls []string, w io.Writer) (ok bool, err error) {
	ok = true
	client := &http.Client{Timeout: timeout}
	if hc != nil {
		client.Transport = hc.Transport
	}
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintf(w, "%s: down (%v)\n", u, err)
			ok = false
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, healthBodyLimit))
		resp.Body.Close()
		fmt.Fprintf(w, "%s: %d %s\n", u, resp.StatusCode, body)
		ok = ok && resp.StatusCode == http.StatusOK
	}
	return ok, nil
}
