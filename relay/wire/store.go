package wire

// The embedded JetStream store's files under the AEP home (the relay's
// StoreDirName and NATSCredsName), here so that a program that only finds
// them, such as a second relay's setup or a test of the built binaries,
// does not link the store.
const (
	StoreDirName  = "relay"
	NATSCredsName = "nats.creds"
)
