package rules

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/apicall"
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

// ErrNoRulesAPI means the relay serves no rules (an older relay, or one
// started without a home for them).
var ErrNoRulesAPI = errors.New("this relay serves no rules")

// List returns the rules in force with their use.
func (c Client) List(ctx context.Context) (Listing, error) {
	var out Listing
	err := c.call(ctx, http.MethodGet, APIPath, nil, &out)
	return out, err
}

// Add adds r and returns it as stored. allowDestructive saves an allow
// rule that would answer destructive commands through a wildcard, which
// the relay otherwise refuses (OverrideDestructive).
func (c Client) Add(ctx context.Context, r Rule, allowDestructive bool) (Rule, error) {
	path := APIPath
	if allowDestructive {
		path += "?" + OverrideDestructive + "=1"
	}
	var out struct{ Rule Rule }
	err := c.call(ctx, http.MethodPost, path, r, &out)
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
	err := apicall.Call{Base: c.Base, Token: c.Token, HTTP: c.HTTP, Timeout: DefaultClientTimeout,
		Limit: MaxFileBytes + maxAPIBody, API: "the rules API"}.Do(ctx, method, path, in, out)
	var e *apicall.Error
	// A 404 that is not the API's own not-found is a relay without it.
	if errors.As(err, &e) && e.Status == http.StatusNotFound && e.Code != CodeNotFound {
		return ErrNoRulesAPI
	}
	return err
}
