package export

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// The flags give the converter they name, refuse a capture ceiling that is
// not one, and know which flags only a live exporter takes.
func TestOptionsFlags(t *testing.T) {
	parse := func(mode string, args ...string) *Options {
		fs := flag.NewFlagSet(mode, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var o Options
		o.BindFlags(fs, mode, t.TempDir())
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &o
	}
	if c, err := parse(NameCE, "--inverse").Converter(); err != nil || c.Mode != ModeCEInverse {
		t.Fatalf("ce --inverse: %v %v", c.Mode, err)
	}
	if _, err := parse(NameOTLP, "--max-capture", "secret").Converter(); err == nil || !strings.Contains(err.Error(), "--max-capture") {
		t.Fatalf("bad ceiling: %v", err)
	}
	if parse(NameOCSF).LiveSet() || !parse(NameOCSF, "--out", "x").LiveSet() {
		t.Fatal("LiveSet")
	}
	_, _, _, err := parse(NameCE, "--inverse").Live(Converter{Mode: ModeCEInverse}, func() (string, error) { return "", nil }, nil)
	if err == nil || !strings.Contains(err.Error(), "no live mode") {
		t.Fatalf("inverse live: %v", err)
	}
	if s := (Counts{In: 3, Out: 2, Bad: 1, Dropped: 1}).Summary("ce"); s != "export ce: 3 in, 2 out, 0 skipped, 1 bad, 1 attribute(s) dropped" {
		t.Fatal(s)
	}
}

// A conversion reports its bad lines and summary on errw and fails on one.
func TestConvertReport(t *testing.T) {
	var out, errw strings.Builder
	ok := Converter{Mode: ModeOCSF, MaxCapture: DefaultMaxCapture}.ConvertReport(nil, strings.NewReader("not json\n"), &out, &errw, NameOCSF)
	if ok || !strings.Contains(errw.String(), "-:1: ") || !strings.Contains(errw.String(), "export ocsf: 1 in, 0 out, 0 skipped, 1 bad") {
		t.Fatalf("ok %v, stderr:\n%s", ok, errw.String())
	}
}
