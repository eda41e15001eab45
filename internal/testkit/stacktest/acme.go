package stacktest

// AcmeName is the name the relay asks Pebble for; the test's DNS server
// resolves it (and everything) to 127.0.0.1.
const AcmeName = "relay.aep-kimi.test"
