package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// notifyCommand is `aep-kimi notify`: the devices subscribed to a relay's
// notifications, and a test of every target.
func notifyCommand(getenv func(string) string, io stdio) cli.Command {
	client := func(fs *flag.FlagSet) *rulesClient { return rulesClientFlags(fs, getenv) }
	return cli.Command{
		Name:    "notify",
		Summary: "the devices subscribed to notifications (list, rm) and a test of every target",
		About: "A relay with a token notifies people when a request waits: Web Push to each device subscribed\n" +
			"from the page (\"Notify me on this device\"), and each --notify target of `up` or `relay`.",
		Env:  []string{"AEP_RELAY", "AEP_TOKEN", "AEP_TOKEN_FILE", "AEP_HOME"},
		Exit: "Exit 0 ok (test: every target took its message), 1 failure (the relay unreachable or refusing, or a target did not take the test), 2 usage.",
		Modes: []cli.Command{
			{
				Name: "list", Forms: []string{"[--json] [--relay URL] [--token-file F]"}, Args: cli.NoArgs,
				About: "Lists the subscribed devices: yours, or with the relay's own token everyone's.",
				Flags: func(fs *flag.FlagSet) cli.Run {
					c := client(fs)
					asJSON := fs.Bool("json", false, "print the relay's answer as JSON")
					return func(ctx context.Context, _ []string) int {
						return runNotify(io, c, "list", func(cl notify.Client) error {
							l, err := cl.List(ctx)
							if err != nil {
								return err
							}
							if *asJSON {
								return json.NewEncoder(io.out).Encode(l)
							}
							writeSubscriptions(io, l, time.Now())
							return nil
						})
					}
				},
			},
			{
				Name: "rm", Forms: []string{"ID"}, Args: cli.Exactly(1), Interspersed: true,
				About: "Removes a subscribed device: it gets no more notifications.",
				Flags: func(fs *flag.FlagSet) cli.Run {
					c := client(fs)
					return func(ctx context.Context, args []string) int {
						return runNotify(io, c, "rm", func(cl notify.Client) error {
							if err := cl.Remove(ctx, args[0]); err != nil {
								return err
							}
							fmt.Fprintf(io.out, "removed %s\n", consumer.Line(args[0]))
							return nil
						})
					}
				},
			},
			{
				Name: "test", Forms: []string{"[--relay URL] [--token-file F]"}, Args: cli.NoArgs,
				About: "Has the relay send a test message to each target and device, and prints what each\n" +
					"answered, one line each. Needs the relay's own token (or an admin's).",
				Flags: func(fs *flag.FlagSet) cli.Run {
					c := client(fs)
					return func(ctx context.Context, _ []string) int {
						failed := false
						code := runNotify(io, c, "test", func(cl notify.Client) error {
							rep, err := cl.Test(ctx)
							if err != nil {
								return err
							}
							if len(rep.Results) == 0 {
								fmt.Fprintln(io.out, "no targets and no subscribed devices: nothing to test")
							}
							for _, r := range rep.Results {
								status := "ok"
								if !r.OK {
									status, failed = "failed: "+r.Error, true
								}
								fmt.Fprintf(io.out, "%s  %s\n", consumer.Line(r.Target), consumer.Line(status))
							}
							return nil
						})
						if code == 0 && failed {
							return 1
						}
						return code
					}
				},
			},
		},
	}
}

// runNotify calls fn with a notification API client (see rulesClient.call).
func runNotify(io stdio, c *rulesClient, mode string, fn func(notify.Client) error) int {
	return c.call(io, "notify "+mode, func(token string, hc *http.Client) error {
		if hc != nil {
			hc.Timeout = notify.DefaultClientTimeout
		}
		return fn(notify.Client{Base: c.url, Token: token, HTTP: hc})
	})
}

// writeSubscriptions prints one line per device: id, whose, which, since
// when, and when a push last got through.
func writeSubscriptions(io stdio, l notify.Listing, now time.Time) {
	if len(l.Subscriptions) == 0 {
		fmt.Fprintln(io.out, "no devices subscribed (the page's \"Notify me on this device\" subscribes one)")
		return
	}
	for _, s := range l.Subscriptions {
		last := "no push yet"
		if !s.LastOK.IsZero() {
			last = "last push " + consumer.HumanDuration(now.Sub(s.LastOK).Round(time.Second)) + " ago"
		}
		fmt.Fprintf(io.out, "%s  %s's %s  since %s  %s\n", consumer.Line(s.ID), consumer.Line(s.Owner), consumer.Line(s.Device),
			s.Created.Local().Format("2006-01-02 15:04"), last)
	}
}
