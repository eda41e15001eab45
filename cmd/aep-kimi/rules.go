package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/apicall"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay/consumer"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/rules"
)

// rulesCommand is `aep-kimi rules`: the fleet's rules, kept by the relay.
func rulesCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "rules",
		Summary: "the rules that answer permission requests for the whole fleet (add, list, rm, test)",
		About: "Rules live with the relay ($AEP_HOME/" + rules.FileName + " on its host) and answer the permission\n" +
			"requests of every session publishing to it: deny beats ask beats allow, ask keeps a person\n" +
			"in the loop. Argument and project patterns are globs (* ? \\); an allow's * never spans a\n" +
			"shell operator. They match what the stream carries: argument text needs the requests at\n" +
			"capture redacted or full (attention is, by default), a project needs AEP_CAPTURE=redacted\n" +
			"on the adapter (the session's directory); `rules test` says when a rule cannot be checked.\n" +
			"Changing rules needs the relay's token.",
		Env:  []string{"AEP_RELAY", "AEP_TOKEN", "AEP_TOKEN_FILE", "AEP_HOME"},
		Exit: "Exit 0 ok, 1 failure (the relay unreachable, or it refused: the reason on stderr), 2 usage.",
		Modes: []cli.Command{
			{
				Name: "add", Forms: []string{"allow|deny|ask --tool NAME [--args GLOB] [--project GLOB] [--agent NAME] [--note TEXT] [--id ID] [--allow-destructive]"},
				About: "Adds a rule and prints its id. The relay refuses an allow rule whose wildcard (or no --args at\n" +
					"all, on a shell tool) would also allow destructive commands (rm, dd, mkfs, shred, chmod -R,\n" +
					"chown -R, git push --force, git reset --hard, git clean, sudo, curl|sh, kubectl delete,\n" +
					"terraform destroy, docker rm, npm publish, ...), saying which; --allow-destructive saves it anyway.",
				Examples: []string{"aep-kimi rules add allow --tool Bash --args 'go test *' --project ~/src/aep-kimi", "aep-kimi rules add deny --tool Bash --args 'rm -rf *' --note 'never force-remove'"},
				Args:     cli.Exactly(1), Interspersed: true,
				Flags: func(fs *flag.FlagSet) cli.Run {
					c := rulesClientFlags(fs, getenv)
					var r rules.Rule
					fs.StringVar(&r.Tool, "tool", "", `the tool's name (e.g. Bash, Read), or "*" for any (required)`)
					fs.StringVar(&r.Args, "args", "", "glob over the tool's argument text (default: any)")
					fs.StringVar(&r.Project, "project", "", "glob over the session's working directory; covers everything under it (default: any)")
					fs.StringVar(&r.Agent, "agent", "", "glob over the agent (default: any)")
					fs.StringVar(&r.Note, "note", "", "why: shown in rules list, and to the agent a deny refuses")
					fs.StringVar(&r.ID, "id", "", "the rule's id (default: a fresh one)")
					destructive := fs.Bool("allow-destructive", false, "save an allow rule even though its wildcard would also allow destructive commands")
					return func(ctx context.Context, args []string) int {
						e, err := rules.ParseEffect(args[0])
						if err != nil {
							fmt.Fprintf(io.err, "aep-kimi rules add: %v\n", err)
							return 2
						}
						if r.Tool == "" {
							fmt.Fprintln(io.err, `aep-kimi rules add: --tool is required (a tool's name, or "*" for any)`)
							return 2
						}
						r.Effect = e
						return c.run(io, "add", func(cl rules.Client) error {
							added, err := cl.Add(ctx, r, *destructive)
							if err == nil {
								fmt.Fprintln(io.out, added.ID)
							}
							return err
						})
					}
				},
			},
			{
				Name: "list", Forms: []string{"[--json]"}, About: "Lists the rules in force with their uses and last use.", Args: cli.NoArgs,
				Flags: func(fs *flag.FlagSet) cli.Run {
					c := rulesClientFlags(fs, getenv)
					asJSON := fs.Bool("json", false, "print the relay's answer as JSON")
					return func(ctx context.Context, _ []string) int {
						return c.run(io, "list", func(cl rules.Client) error {
							l, err := cl.List(ctx)
							if err != nil {
								return err
							}
							if *asJSON {
								return json.NewEncoder(io.out).Encode(l)
							}
							rules.WriteList(io.out, l, time.Now())
							return nil
						})
					}
				},
			},
			{
				Name: "rm", Forms: []string{"ID"}, About: "Removes a rule.", Args: cli.Exactly(1), Interspersed: true,
				Flags: func(fs *flag.FlagSet) cli.Run {
					c := rulesClientFlags(fs, getenv)
					return func(ctx context.Context, args []string) int {
						return c.run(io, "rm", func(cl rules.Client) error {
							gone, err := cl.Remove(ctx, args[0])
							if err == nil {
								fmt.Fprintf(io.out, "removed %s (%s)\n", gone.ID, rules.Describe(gone))
							}
							return err
						})
					}
				},
			},
			{
				Name: "test", Forms: []string{"--tool NAME [--args TEXT] [--project DIR] [--agent NAME] [--capture LEVEL] [--json]"},
				About: "Says which rule would decide a request, and why, rule by rule, and the destructive commands\n" +
					"each allow rule about the tool would also allow through its wildcard. Without --args (or at\n" +
					"--capture metadata) the request carries no argument text, as a request captured at\n" +
					"metadata does: no rule with args can match it.",
				Args: cli.NoArgs,
				Flags: func(fs *flag.FlagSet) cli.Run {
					c := rulesClientFlags(fs, getenv)
					var p rules.Probe
					fs.StringVar(&p.Tool, "tool", "", "the tool's name (required)")
					args := fs.String("args", "", "the tool's argument text, as the request shows it")
					project := fs.String("project", "", "the session's working directory")
					fs.StringVar(&p.Agent, "agent", "kimi-code", "the agent")
					fs.StringVar(&p.Capture, "capture", "", "the request's capture level (default full; below redacted it carries neither text nor directory)")
					asJSON := fs.Bool("json", false, "print the relay's answer as JSON")
					return func(ctx context.Context, _ []string) int {
						if p.Tool == "" {
							fmt.Fprintln(io.err, "aep-kimi rules test: --tool is required")
							return 2
						}
						if *args != "" {
							p.Args = args
						}
						if *project != "" {
							p.Project = project
						}
						return c.run(io, "test", func(cl rules.Client) error {
							v, err := cl.Test(ctx, p)
							if err != nil {
								return err
							}
							if *asJSON {
								return json.NewEncoder(io.out).Encode(v)
							}
							rules.WriteVerdict(io.out, p, v)
							return nil
						})
					}
				},
			},
		},
	}
}

// rulesClient is the flags every rules mode shares: where the relay is and
// how to find its token.
type rulesClient struct {
	*relayClient
	home string
}

func rulesClientFlags(fs *flag.FlagSet, getenv func(string) string) *rulesClient {
	c := &rulesClient{relayClient: relayConnFlags(fs, getenv)}
	fs.StringVar(&c.home, "home", tokenfile.AEPHome(getenv), "AEP home, where the relay token is found when AEP_TOKEN is not set (env AEP_HOME)")
	return c
}

// run reads the token, calls fn with a rules client and maps its error to
// an exit code and one line.
func (c *rulesClient) run(io stdio, mode string, fn func(rules.Client) error) int {
	return c.call(io, "rules "+mode, func(token string, hc *http.Client) error {
		return fn(rules.Client{Base: c.url, Token: token, HTTP: hc})
	})
}

// call reads the token and the relay's TLS trust, calls fn with them and
// maps its error to an exit code and one line: 2 for a usage or local
// problem, 1 for the relay's refusal or an unreachable relay.
func (c *rulesClient) call(io stdio, what string, fn func(token string, hc *http.Client) error) int {
	token, err := tokenfile.ClientIn(c.getenv, c.tokenFile, c.home)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", what, err)
		return 2
	}
	hc, err := c.http()
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", what, err)
		return 2
	}
	err = fn(token, hc)
	var apiErr *apicall.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &apiErr):
		fmt.Fprintf(io.err, "aep-kimi %s: the relay refused: %s\n", what, consumer.Line(apiErr.Error()))
	default:
		fmt.Fprintf(io.err, "aep-kimi %s: relay %s: %s\n", what, httpguard.DisplayURL(c.url), consumer.Line(err.Error()))
	}
	return 1
}
