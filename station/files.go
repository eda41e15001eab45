package station

import (
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/rules"
	"github.com/aep-kimi/aep-kimi/setup"
)

// HomeFile is a file or directory the binaries keep under a home.
type HomeFile struct {
	// Path is under the home, slash-separated; a <word> or * stands for
	// many names. A directory's path ends in /.
	Path string
	// Mode is what it is created with (0 when NATS or Kimi decide).
	Mode  fs.FileMode
	Holds string
}

// The two homes whose files HomeFiles lists.
const (
	HomeAEP  = "$AEP_HOME"
	HomeKimi = "$KIMI_CODE_HOME"
)

// HomeFiles is what lives under home (HomeAEP or HomeKimi), built from the
// names the code uses. The reference test starts the daemons on an empty
// home and checks that every file they make is listed here, with its mode.
func HomeFiles(home string) []HomeFile {
	const h = "/h"
	rel := func(p string) string { r, _ := filepath.Rel(h, p); return filepath.ToSlash(r) }
	if home == HomeKimi {
		return []HomeFile{
			{Path: setup.ConfigFileName, Mode: 0, Holds: "Kimi's config; aep-setup write adds one fenced block of [[hooks]] tables, remove strips it (the file keeps its mode)"},
			{Path: setup.ConfigFileName + setup.BackupInfix + "<time>", Mode: 0o600, Holds: "the config as it was before aep-setup changed it"},
			{Path: rel(bridgeweb.InstancesDir(h)) + "/", Holds: "kimi web's instance records, which bridge-web follows (read only)"},
		}
	}
	adapterLogs := "logs/" + mapping.Agent + "/"
	webLogs := rel(bridgeweb.LogDir(h)) + "/"
	return []HomeFile{
		{Path: tokenfile.HomeName, Mode: 0o600, Holds: "the relay token up created (never logged; the banner prints its path)"},
		{Path: "kimi/", Mode: 0o700, Holds: "the hook channel's state"},
		{Path: rel(adapter.TokenPath(h)), Mode: 0o600, Holds: "the hook token shared by the adapter and kimi-hook"},
		{Path: "kimi/epoch", Mode: 0o600, Holds: "the adapter's epoch counter (event ids stay unique across restarts)"},
		{Path: "kimi/web-epoch", Mode: 0o600, Holds: "bridge-web's epoch counter"},
		{Path: rel(spool.Dir(h)) + "/", Mode: 0o700, Holds: "hook payloads waiting for the adapter, unredacted, removed once ingested"},
		{Path: rel(spool.Dir(h)) + "/*", Mode: 0o600, Holds: "one hook payload each, and the .lock kimi-hook numbers them under"},
		{Path: rel(filepath.Join(spool.Dir(h), spool.QuarantineDir)) + "/", Mode: 0o700, Holds: "payloads the adapter could not ingest, unredacted, at most 7 days and 64 MiB, each with a .reason note"},
		{Path: "logs/", Mode: 0o700, Holds: "the session logs"},
		{Path: adapterLogs, Mode: 0o700, Holds: "the adapter's session logs"},
		{Path: adapterLogs + "<session>.jsonl", Mode: 0o600, Holds: "every event of a session, at the adapter's capture ceiling (names percent-encode anything outside [A-Za-z0-9._-])"},
		{Path: webLogs, Mode: 0o700, Holds: "bridge-web's session logs"},
		{Path: webLogs + "<session>.jsonl", Mode: 0o600, Holds: "every event of a kimi web session"},
		{Path: "logs/*/<session>.jsonl" + journal.TornSuffix + "<time>", Mode: 0o600, Holds: "a torn log tail cut off on repair, kept until you delete it"},
		{Path: relay.StoreDirName + "/", Mode: 0o700, Holds: "the embedded JetStream store (--store jetstream)"},
		{Path: relay.StoreDirName + "/jetstream/", Holds: "NATS's own files: every buffered event"},
		{Path: relay.StoreDirName + "/relay.lock", Mode: 0o600, Holds: "held while a relay uses the store, so a second cannot"},
		{Path: relay.StoreDirName + "/index.snap", Mode: 0o600, Holds: "the store's index while the relay is stopped: read and removed by the next start"},
		{Path: relay.StoreDirName + "/" + relay.NATSCredsName, Mode: 0o600, Holds: "the NATS user second relays connect to the embedded NATS as (made on first --nats-listen; never printed or logged)"},
		{Path: rules.FileName, Mode: 0o600, Holds: "the fleet's rules, on the relay's host"},
		{Path: strings.TrimSuffix(rules.FileName, ".json") + ".uses.json", Mode: 0o600, Holds: "each rule's use counts"},
		{Path: access.FileName, Mode: 0o600, Holds: "people's tokens as SHA-256 hashes, with names, roles and capture ceilings (aep-kimi token)"},
		{Path: access.UsesFileName, Mode: 0o600, Holds: "when the relay last admitted each person's token"},
		{Path: "logins/<name>.txt", Mode: 0o600, Holds: "what token add writes off a terminal; delete it once handed over"},
		{Path: fleetpage.LoginsFileName, Mode: 0o600, Holds: "the fleet page's login generation; logging out replaces it, ending every browser's login"},
		{Path: fleetpage.OpenFileName, Mode: 0o600, Holds: "aep-kimi open's page that logs the browser in"},
		{Path: fleetpage.DashOpenFileName, Mode: 0o600, Holds: "aep-kimi dash's page that logs the browser in"},
		{Path: notify.KeyFileName, Mode: 0o600, Holds: "the key answer links are signed with; replacing it voids every link sent"},
		{Path: notify.UsedFileName, Mode: 0o600, Holds: "the answer links already used, until they expire"},
		{Path: notify.VAPIDFileName, Mode: 0o600, Holds: "the relay's Web Push (VAPID) key pair"},
		{Path: notify.SubscriptionsFileName, Mode: 0o600, Holds: "each device subscribed to Web Push"},
		{Path: notify.WebhookSecretName, Mode: 0o600, Holds: "the key webhook: targets sign with when they name no secret-file"},
		{Path: ACMEDirName + "/", Mode: 0o700, Holds: "the ACME account key and the certificates issued (0600)"},
		{Path: "tail-state.json", Mode: 0o600, Holds: "where aep-kimi tail resumes"},
		{Path: "export-<mode>-state.json", Mode: 0o600, Holds: "where a live exporter resumes"},
	}
}
