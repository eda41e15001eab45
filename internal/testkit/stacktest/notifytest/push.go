package notifytest

import (
	"net/http"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// PushManagerJS stands in for the browser's push service in the page: a
// headless Chromium reaches none, so PushManager hands out the test push
// service's subscription (%s, its JSON), and only for the key %s (the
// relay's VAPID key, base64url), as a push service made for that key would.
// It is added by the test over the DevTools protocol; the page is as served.
const PushManagerJS = `(() => {
  const sub = %s, key = %s;
  const b64 = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  let current = null;
  PushManager.prototype.subscribe = async function (opts) {
    if (!opts || opts.userVisibleOnly !== true || b64(opts.applicationServerKey) !== key) {
      throw new DOMException('not the relay key', 'InvalidAccessError');
    }
    current = { endpoint: sub.endpoint, expirationTime: null, options: { userVisibleOnly: true, applicationServerKey: new Uint8Array(opts.applicationServerKey).buffer },
      toJSON: () => sub, unsubscribe: async () => { current = null; return true; } };
    return current;
  };
  PushManager.prototype.getSubscription = async function () { return current; };
})()`

// PathVAPID is where the relay serves its VAPID key: PathVAPID,
// spelled out so that this package links no relay (notify's tests check
// the two agree).
const PathVAPID = "/notify/vapid"

// VapidKey is the relay's VAPID public key (base64url), read with its token.
func VapidKey(t testing.TB, st *stacktest.Stack) string {
	t.Helper()
	var vapid struct {
		PublicKey string `json:"public_key"`
	}
	httpcall.Get(t, st.RelayURL+PathVAPID, st.Token).Want(t, http.StatusOK).JSON(t, &vapid)
	if vapid.PublicKey == "" {
		t.Fatalf("GET %s: no public key", PathVAPID)
	}
	return vapid.PublicKey
}
