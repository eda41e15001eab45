package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"rsc.io/qr"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// tokenCommand is `aep-kimi token`: the people of the relay kept in this
// AEP home, each with a token of their own.
func tokenCommand(getenv func(string) string, io stdio) cli.Command {
	homeFlag := func(fs *flag.FlagSet) *string {
		return fs.String("home", tokenfile.AEPHome(getenv), "the relay's AEP home, where "+access.FileName+" is kept (env AEP_HOME)")
	}
	return cli.Command{
		Name:    "token",
		Summary: "people's own tokens for the relay, each with a role (add, list, rm)",
		About: "Each person gets a token of their own, kept by the relay only as a hash ($AEP_HOME/" + access.FileName + ",\n" +
			"mode 0600), with a role: watch reads (streams, the page, rules), answer also answers\n" +
			"requests and cancels runs, admin also instructs, emits and changes rules. Each token has a\n" +
			"capture ceiling on everything the relay serves it: metadata for watch unless given, what\n" +
			"the relay holds for the others. The relay's own token stays the owner's (admin). A running\n" +
			"relay on this home picks changes up within a second; rm closes what the token opened.",
		Env:  []string{"AEP_HOME", "AEP_RELAY"},
		Exit: "Exit 0 ok, 1 failure (the tokens file unreadable: nothing is changed), 2 usage.",
		Modes: []cli.Command{
			{
				Name: "add", Forms: []string{"NAME --role watch|answer|admin [--capture metadata|redacted|full] [--json] [--out FILE]"},
				About: "Makes NAME's token and hands it over, once: it is kept only as a hash. On a terminal it prints\n" +
					"the token, the page's login link for the relay (--relay) and that link as a QR code, for a phone;\n" +
					"off a terminal it writes them to a 0600 file ($AEP_HOME/logins/NAME.txt, or --out) and prints\n" +
					"only its path, so no log or redirect holds the token. --json prints the token for a program.",
				Examples:     []string{"aep-kimi token add alice --role answer", "aep-kimi token add ci --role watch --json"},
				Args:         cli.Exactly(1),
				Interspersed: true,
				Flags: func(fs *flag.FlagSet) cli.Run {
					home := homeFlag(fs)
					role := fs.String("role", "", "watch, answer or admin (required)")
					capture := fs.String("capture", "", "the ceiling on what the relay serves this token: metadata, redacted or full (default: metadata for watch, everything the relay holds for the others)")
					asJSON := fs.Bool("json", false, "print {name, role, capture, token} as JSON")
					relayURL := fs.String("relay", client.URLFromEnv(getenv), "the relay's address, for the login link (env AEP_RELAY)")
					outFile := fs.String("out", "", "off a terminal, the 0600 file the token, login link and QR code go to (default $AEP_HOME/logins/NAME.txt)")
					return func(_ context.Context, args []string) int {
						r, err := access.ParseRole(*role)
						if err != nil {
							fmt.Fprintf(io.err, "aep-kimi token add: --role: %v\n", err)
							return cli.ExitUsage
						}
						if *capture != "" {
							if c, err := aep.ParseCapture(*capture); err != nil || c == aep.CaptureNone {
								fmt.Fprintf(io.err, "aep-kimi token add: --capture %q: want metadata, redacted or full\n", *capture)
								return cli.ExitUsage
							}
						}
						if err := access.CheckName(args[0]); err != nil {
							fmt.Fprintf(io.err, "aep-kimi token add: %v\n", err)
							return cli.ExitUsage
						}
						e, tok, err := access.Store{Home: *home}.Add(args[0], r, *capture)
						if err != nil {
							fmt.Fprintf(io.err, "aep-kimi token add: %v\n", err)
							return 1
						}
						capt := e.Principal().Capture.String()
						if *asJSON {
							_ = json.NewEncoder(io.out).Encode(map[string]string{"name": e.Name, "role": string(e.Role), "capture": capt, "token": tok})
							return 0
						}
						if consumer.IsTerminal(io.out) {
							writeHandover(io.out, e, capt, tok, *relayURL)
							return 0
						}
						path := *outFile
						if path == "" {
							path = filepath.Join(*home, loginsDir, e.Name+".txt")
						}
						if err := handoverFile(path, e, capt, tok, *relayURL); err != nil {
							fmt.Fprintf(io.err, "aep-kimi token add: %s's token is made, but %v: run token rm %s and add again\n", e.Name, err, e.Name)
							return 1
						}
						fmt.Fprintf(io.out, "%s (%s, capture %s): token, login link and QR code written to %s (0600); hand them to %s, then delete it\n",
							e.Name, e.Role, capt, path, e.Name)
						return 0
					}
				},
			},
			{
				Name: "list", Forms: []string{"[--json]"}, About: "Lists the people: name, role, capture, created and last use. Never a token.",
				Args: cli.NoArgs,
				Flags: func(fs *flag.FlagSet) cli.Run {
					home := homeFlag(fs)
					asJSON := fs.Bool("json", false, "print the list as JSON")
					return func(context.Context, []string) int {
						l, err := access.Store{Home: *home}.List()
						if err != nil {
							fmt.Fprintf(io.err, "aep-kimi token list: %v\n", err)
							return 1
						}
						if *asJSON {
							_ = json.NewEncoder(io.out).Encode(map[string]any{"people": l})
							return 0
						}
						writePeople(io.out, l, time.Now())
						return 0
					}
				},
			},
			{
				Name: "rm", Forms: []string{"NAME"}, About: "Revokes NAME's token; a running relay closes what it opened (streams, sockets, page logins).",
				Args: cli.Exactly(1), Interspersed: true,
				Flags: func(fs *flag.FlagSet) cli.Run {
					home := homeFlag(fs)
					return func(_ context.Context, args []string) int {
						gone, err := access.Store{Home: *home}.Remove(args[0])
						if err != nil {
							fmt.Fprintf(io.err, "aep-kimi token rm: %v\n", err)
							if errors.Is(err, access.ErrUnknown) {
								return cli.ExitUsage
							}
							return 1
						}
						fmt.Fprintf(io.out, "removed %s (%s)\n", gone.Name, gone.Role)
						return 0
					}
				},
			},
		},
	}
}

// loginsDir holds, under the AEP home, the handovers token add writes off
// a terminal.
const loginsDir = "logins"

// handoverFile writes the handover to path, mode 0600 (its directory
// 0700), replacing what is there without following a link.
func handoverFile(path string, e access.Entry, capture, tok, relayURL string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	var b strings.Builder
	writeHandover(&b, e, capture, tok, relayURL)
	return atomicfile.Write(path, []byte(b.String()), atomicfile.Options{Perm: 0o600})
}

// writeHandover writes a new token, the one time it is shown, with the
// page's login link and its QR code, for a phone: on a terminal, or into a
// 0600 file.
func writeHandover(w io.Writer, e access.Entry, capture, tok, relayURL string) {
	fmt.Fprintf(w, "%s (%s, capture %s): this token is shown once; hand it to %s and keep no copy\n", e.Name, e.Role, capture, e.Name)
	fmt.Fprintln(w, tok)
	link := fleetpage.LoginURL(relayURL, tok)
	fmt.Fprintf(w, "\nlog in on the page: %s\n", link)
	if code, err := qr.Encode(link, qr.M); err == nil {
		fmt.Fprintln(w)
		_, _ = io.WriteString(w, renderQR(code))
	}
}

// renderQR draws a QR code for a terminal, two modules a line (upper and
// lower half blocks), light on dark with a quiet zone: the way terminal
// QR codes are read by phone cameras.
func renderQR(c *qr.Code) string {
	const quiet = 2
	dark := func(x, y int) bool {
		return x >= 0 && y >= 0 && x < c.Size && y < c.Size && c.Black(x, y)
	}
	var b strings.Builder
	for y := -quiet; y < c.Size+quiet; y += 2 {
		for x := -quiet; x < c.Size+quiet; x++ {
			top, bottom := !dark(x, y), !dark(x, y+1) // light modules are drawn
			switch {
			case top && bottom:
				b.WriteString("█")
			case top:
				b.WriteString("▀")
			case bottom:
				b.WriteString("▄")
			default:
				b.WriteString(" ")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// writePeople prints token list's table.
func writePeople(w io.Writer, l []access.Listed, now time.Time) {
	if len(l) == 0 {
		fmt.Fprintln(w, "no people yet: aep-kimi token add NAME --role watch|answer|admin")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tCAPTURE\tTOKEN\tCREATED\tLAST USE")
	for _, p := range l {
		last := "never"
		if !p.LastUse.IsZero() {
			last = consumer.HumanDuration(now.Sub(p.LastUse)) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Role, p.Capture, p.Token, p.Created.Local().Format("2006-01-02 15:04"), last)
	}
	_ = tw.Flush()
}
