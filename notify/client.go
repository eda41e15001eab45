package notify

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/apicall"
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

// ErrNoNotifyAPI means the relay serves no notifications (an older relay,
// or one without a token).
var ErrNoNotifyAPI = errors.New("this relay serves no notifications (an older relay, or one without a token)")

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
	err := apicall.Call{Base: c.Base, Token: c.Token, HTTP: c.HTTP, Timeout: DefaultClientTimeout,
		Limit: 1 << 20, API: "the notification API"}.Do(ctx, method, path, nil, out)
	var e *apicall.Error
	// A 404 outside one subscription's path is a relay without the API.
	if errors.As(err, &e) && e.Status == http.StatusNotFound && !strings.HasPrefix(path, PathSubscriptions+"/") {
		return ErrNoNotifyAPI
	}
	return err
}
