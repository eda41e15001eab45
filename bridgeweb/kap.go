package bridgeweb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// kap-server REST codes the bridge tells apart: 40902 answers a second
// decision on an approval or question already resolved (or dismissed),
// 40405 one on a question kap-server does not have; 40909 is what 2.1.0
// answers a successful question :dismiss with (HTTP 200, data.dismissed
// true).
const (
	kapCodeAlreadyResolved   = 40902
	kapCodeQuestionNotFound  = 40405
	kapCodeQuestionDismissed = 40909
)

// maxRESTBody bounds one REST response the bridge reads.
const maxRESTBody = 8 << 20

// ErrUnauthorized means the kap-server refused the bearer token.
var ErrUnauthorized = errors.New("kap-server refused the bearer token (HTTP 401)")

// KapError is a kap-server envelope with a non-zero code.
type KapError struct {
	Status int
	Code   int64
	Msg    string
	// Data is the envelope's data, as sent.
	Data json.RawMessage
}

func (e *KapError) Error() string {
	return fmt.Sprintf("kap-server error %d (HTTP %d): %s", e.Code, e.Status, e.Msg)
}

// kapClient speaks the kap-server's REST surface: the {code, msg, data}
// envelope, bearer auth.
type kapClient struct {
	ep   endpoint
	http *http.Client
}

// call does one request and decodes data into out (when non-nil).
func (k kapClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, k.ep.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+k.ep.token)
	resp, err := k.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, redactPath(path), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return ErrUnauthorized
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxRESTBody))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, redactPath(path), err)
	}
	var env struct {
		Code *int64          `json:"code"`
		Msg  string          `json:"msg"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || env.Code == nil {
		return fmt.Errorf("%s %s: HTTP %d without the kap envelope", method, redactPath(path), resp.StatusCode)
	}
	if *env.Code != 0 {
		return &KapError{Status: resp.StatusCode, Code: *env.Code, Msg: env.Msg, Data: env.Data}
	}
	if out != nil && len(env.Data) > 0 {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return fmt.Errorf("%s %s: data: %w", method, redactPath(path), err)
		}
	}
	return nil
}

// redactPath keeps only the route shape in errors: ids are vendor data.
func redactPath(p string) string {
	if u, err := url.Parse(p); err == nil {
		return u.Path
	}
	return "?"
}

// healthz is the unauthenticated liveness probe.
func (k kapClient) healthz(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.ep.base+"/api/v1/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := k.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // drained for reuse
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz: HTTP %d", resp.StatusCode)
	}
	return nil
}

// sessionPage is one page of GET /api/v1/sessions.
type sessionPage struct {
	Items []struct {
		ID       string `json:"id"`
		Archived bool   `json:"archived"`
	} `json:"items"`
	HasMore bool `json:"has_more"`
}

// maxSessionPages bounds the listing (100 per page): a guard against a
// server that keeps saying has_more.
const maxSessionPages = 1000

// listSessions pages through every unarchived session, newest first.
func (k kapClient) listSessions(ctx context.Context) ([]string, error) {
	var ids []string
	seen := map[string]bool{}
	before := ""
	for page := 0; page < maxSessionPages; page++ {
		q := url.Values{"page_size": {"100"}}
		if before != "" {
			q.Set("before_id", before)
		}
		var p sessionPage
		if err := k.call(ctx, http.MethodGet, "/api/v1/sessions?"+q.Encode(), nil, &p); err != nil {
			return nil, err
		}
		progressed := false
		for _, it := range p.Items {
			if it.ID == "" || seen[it.ID] {
				continue
			}
			seen[it.ID] = true
			progressed = true
			if !it.Archived {
				ids = append(ids, it.ID)
			}
		}
		if !p.HasMore || !progressed || len(p.Items) == 0 {
			return ids, nil
		}
		before = p.Items[len(p.Items)-1].ID
	}
	return ids, nil
}

// decideApproval posts an approval decision. It reports false when the
// approval was already resolved (40902).
func (k kapClient) decideApproval(ctx context.Context, session, approval string, body map[string]any) (bool, error) {
	var out struct {
		Resolved bool `json:"resolved"`
	}
	path := "/api/v1/sessions/" + url.PathEscape(session) + "/approvals/" + url.PathEscape(approval)
	err := k.call(ctx, http.MethodPost, path, body, &out)
	var ke *KapError
	if errors.As(err, &ke) && ke.Code == kapCodeAlreadyResolved {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return out.Resolved, nil
}

// questionPath is the REST path of a session's question, tail appended.
func questionPath(session, question, tail string) string {
	return "/api/v1/sessions/" + url.PathEscape(session) + "/questions/" + url.PathEscape(question) + tail
}

// errQuestionClosed is kap-server saying a question no longer waits: it
// was answered or dismissed already (40902), or it is gone (40405).
var errQuestionClosed = errors.New("the question no longer waits on the kap-server")

// answerQuestion posts the answers to a question (the question response
// body); errQuestionClosed when it no longer waits.
func (k kapClient) answerQuestion(ctx context.Context, session, question string, answers map[string]any) error {
	var out struct {
		Resolved bool `json:"resolved"`
	}
	err := k.call(ctx, http.MethodPost, questionPath(session, question, ""), map[string]any{"answers": answers}, &out)
	if err := questionClosed(err); err != nil {
		return err
	}
	if !out.Resolved {
		return errors.New("the kap-server did not say the question was resolved")
	}
	return nil
}

// dismissQuestion dismisses a question (:dismiss, no body): Kimi's tool
// result says the person chose not to answer. errQuestionClosed when it no
// longer waits.
func (k kapClient) dismissQuestion(ctx context.Context, session, question string) error {
	var out struct {
		Dismissed bool `json:"dismissed"`
	}
	err := k.call(ctx, http.MethodPost, questionPath(session, question, ":dismiss"), nil, &out)
	var ke *KapError
	if errors.As(err, &ke) && ke.Code == kapCodeQuestionDismissed {
		// 2.1.0 says a dismissal succeeded with a non-zero code: its data
		// tells.
		if json.Unmarshal(ke.Data, &out) == nil && out.Dismissed {
			return nil
		}
	}
	if err := questionClosed(err); err != nil {
		return err
	}
	if !out.Dismissed {
		return errors.New("the kap-server did not say the question was dismissed")
	}
	return nil
}

// questionClosed turns kap's no-longer-waiting codes into
// errQuestionClosed; other errors pass.
func questionClosed(err error) error {
	var ke *KapError
	if errors.As(err, &ke) && (ke.Code == kapCodeAlreadyResolved || ke.Code == kapCodeQuestionNotFound) {
		return errQuestionClosed
	}
	return err
}

// activePrompt returns the id of the prompt running in session, "" when idle.
func (k kapClient) activePrompt(ctx context.Context, session string) (string, error) {
	var out struct {
		Active *struct {
			PromptID string `json:"prompt_id"`
		} `json:"active"`
	}
	if err := k.call(ctx, http.MethodGet, "/api/v1/sessions/"+url.PathEscape(session)+"/prompts", nil, &out); err != nil {
		return "", err
	}
	if out.Active == nil {
		return "", nil
	}
	return out.Active.PromptID, nil
}

// abortPrompt aborts a running prompt; the turn ends "cancelled".
func (k kapClient) abortPrompt(ctx context.Context, session, prompt string) (bool, error) {
	var out struct {
		Aborted bool `json:"aborted"`
	}
	path := "/api/v1/sessions/" + url.PathEscape(session) + "/prompts/" + url.PathEscape(prompt) + ":abort"
	if err := k.call(ctx, http.MethodPost, path, nil, &out); err != nil {
		return false, err
	}
	return out.Aborted, nil
}
