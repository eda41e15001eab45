// Tools module: pins Pebble (Let's Encrypt's test ACME server, which the
// relay's ACME test issues a real certificate from) apart from the main
// module, so none of its dependencies enter the main build. Built by
// internal/testkit/pebbletest.
module github.com/aep-kimi/aep-kimi/tools/pebble

go 1.26.8

tool github.com/letsencrypt/pebble/v2/cmd/pebble

require (
	github.com/go-jose/go-jose/v4 v4.1.8 // indirect
	github.com/letsencrypt/challtestsrv v1.4.2 // indirect
	github.com/letsencrypt/pebble/v2 v2.10.3 // indirect
	github.com/miekg/dns v1.1.62 // indirect
	golang.org/x/mod v0.24.0 // indirect
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sync v0.14.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/tools v0.33.0 // indirect
)
