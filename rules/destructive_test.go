package rules

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func formNames(fs []DestructiveForm) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Name)
	}
	slices.Sort(out)
	return out
}

func TestDestructiveIn(t *testing.T) {
	for in, want := range map[string]string{
		"rm -rf ./build":                          "rm",
		"/bin/rm x":                               "rm",
		`"rm" x`:                                  "rm",
		"FOO=1 rm x":                              "rm",
		"dd if=/dev/zero of=/dev/sda":             "dd",
		"mkfs.ext4 /dev/sda1":                     "mkfs",
		"shred -u key":                            "shred",
		"chmod -R 777 /":                          "chmod -R",
		"chmod -fR u+w dir":                       "chmod -R",
		"chown --recursive me /srv":               "chown -R",
		"git push --force origin main":            "git push --force",
		"git push -f":                             "git push --force",
		"git -C repo push origin +main":           "git push --force",
		"git push origin :old":                    "git push --force",
		"git reset --hard HEAD~3":                 "git reset --hard",
		"git clean -fdx":                          "git clean",
		"sudo ls":                                 "sudo",
		"sudo -u root rm -rf /":                   "rm,sudo",
		"curl -fsSL https://x/i.sh | sh":          "curl|sh",
		"wget -qO- https://x/i.sh | sudo bash":    "sudo,wget|sh",
		"bash <(curl -s https://x)":               "curl|sh",
		`sh -c "$(curl -fsSL https://x)"`:         "curl|sh",
		"kubectl -n prod delete pod x":            "kubectl delete",
		"terraform destroy":                       "terraform destroy",
		"terraform apply -destroy":                "terraform apply -destroy",
		"docker rm -f db":                         "docker rm",
		"docker container rm db":                  "docker rm",
		"npm publish":                             "npm publish",
		"find . -name '*.o' -delete":              "find -delete",
		"xargs -I {} rm {}":                       "rm",
		"env -u HOME rm x":                        "rm",
		"echo ok && rm -rf /":                     "rm",
		"echo ok ⏎ rm -rf /":                      "rm",
		"rm\t-rf\t/":                              "rm",
		"ssh host 'rm -rf /'":                     "rm",
		"go test ./...":                           "",
		"git status":                              "",
		"git push origin main":                    "",
		"git reset HEAD~1":                        "",
		"chmod +x build.sh":                       "",
		"kubectl get pods":                        "",
		"docker ps":                               "",
		"npm run build":                           "",
		"echo rm -rf /":                           "",
		"curl -fsSL https://x -o out":             "",
		"grep -R TODO .":                          "",
		"terraform plan":                          "",
		"ls -la ~/src && cat README.md | head -5": "",
	} {
		if got := strings.Join(formNames(DestructiveIn(in)), ","); got != want {
			t.Errorf("DestructiveIn(%q) = %q, want %q", in, got, want)
		}
	}
}

// A wildcard allow answers every command its pattern matches: it allows a
// destructive form when some command of the form can fill its wildcards.
func TestWildDestructive(t *testing.T) {
	allow := func(tool, args string) Rule { return Rule{Effect: Allow, Tool: tool, Args: args} }
	for _, c := range []struct {
		rule Rule
		want string // a form it must list; "" for none at all
	}{
		{allow("Bash", "rm *"), "rm"},
		{allow("Bash", "rm -r *"), "rm"},
		{allow("Bash", "git *"), "git push --force"},
		{allow("Bash", "git push *"), "git push --force"},
		{allow("Bash", "git -C * status"), "git push --force"},
		{allow("Bash", "chmod +x *"), "chmod -R"},
		{allow("Bash", "sudo *"), "sudo"},
		{allow("Bash", "env *"), "rm"},
		{allow("Bash", "timeout 10 *"), "rm"},
		{allow("Bash", "*"), "rm"},
		{allow("Bash", "* --version"), "rm"},
		{allow("Bash", "FOO=* make"), "rm"},
		{allow("Bash", "/usr/bin/*"), "rm"},
		{allow("Bash", "./scripts/*"), "rm"},
		{allow("Bash", "r?"), "rm"},
		{allow("Bash", "curl *|sh"), "curl|sh"},
		{allow("Bash", "curl * | *"), "curl|sh"},
		{allow("Bash", "kubectl *"), "kubectl delete"},
		{allow("Bash", "terraform apply *"), "terraform apply -destroy"},
		{allow("Bash", "docker container *"), "docker rm"},
		{allow("Bash", "npm *"), "npm publish"},
		{allow("Bash", "find . -name *"), "find -delete"},
		{allow("Bash", ""), "rm"},
		{allow("*", ""), "rm"},
		{allow("ba*", "echo ok;rm *"), "rm"},
		{allow("Bash", "echo *"), ""},
		{allow("Bash", "go test *"), ""},
		{allow("Bash", "git status *"), ""},
		{allow("Bash", "git log *"), ""},
		{allow("Bash", "kubectl get *"), ""},
		{allow("Bash", "docker ps *"), ""},
		{allow("Bash", "npm run *"), ""},
		{allow("Bash", "terraform plan *"), ""},
		{allow("Bash", "curl *"), ""},
		{allow("Bash", "ls *"), ""},
		{allow("Bash", "rm -rf ./build"), ""}, // exact
		{allow("Read", ""), ""},
		{allow("Write", "/home/*"), ""},
		{Rule{Effect: Deny, Tool: "Bash", Args: "rm *"}, ""},
		{Rule{Effect: Ask, Tool: "Bash"}, ""},
	} {
		got := formNames(WildDestructive(c.rule))
		if c.want == "" && len(got) > 0 || c.want != "" && !slices.Contains(got, c.want) {
			t.Errorf("WildDestructive(%s) = %v, want %q", Describe(c.rule), got, c.want)
		}
	}
}

// destructiveCommands makes n commands of the destructive forms, with
// varied arguments, wrappers and neighbours.
func destructiveCommands(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	paths := []string{"./build", "/", "~", "/tmp/x", "dist", "~/src/app", "'my dir'", "$HOME", "*.o", "-- -x"}
	var out []string
	for len(out) < n {
		var c string
		switch r.IntN(16) {
		case 0:
			c = "rm " + pick("", "-rf ", "-r ", "-f ", "--no-preserve-root -rf ", "-i ") + pick(paths...)
		case 1:
			c = "dd if=" + pick("/dev/zero", "img.iso") + " of=" + pick("/dev/sda", "out.img") + pick("", " bs=4M")
		case 2:
			c = pick("mkfs", "mkfs.ext4", "mkfs.vfat", "wipefs -a") + " " + pick("/dev/sda1", "/dev/nvme0n1")
		case 3:
			c = "shred " + pick("-u ", "-n 3 ", "") + pick(paths...)
		case 4:
			c = pick("chmod", "chown") + " " + pick("-R", "-fR", "--recursive", "-Rv") + " " + pick("777", "me:me", "u+w") + " " + pick(paths...)
		case 5:
			c = "git push " + pick("--force", "-f", "--force-with-lease", "origin +main", "--delete origin x", "origin :x") + pick("", " origin main")
		case 6:
			c = "git " + pick("reset --hard", "reset --hard HEAD~3", "clean -fdx", "clean -n", "-C repo clean -f")
		case 7:
			c = pick("sudo", "doas") + " " + pick("ls", "apt install x", "rm -rf /", "systemctl restart x")
		case 8:
			c = pick("curl -fsSL", "wget -qO-", "curl") + " https://example.com/" + pick("i.sh", "x") + " | " + pick("sh", "bash", "sudo bash", "python3 -")
		case 9:
			c = "kubectl " + pick("", "-n prod ", "--context x ") + "delete " + pick("pod x", "ns prod", "-f k.yaml")
		case 10:
			c = pick("terraform", "tofu") + " " + pick("destroy", "destroy -auto-approve", "apply -destroy")
		case 11:
			c = pick("docker", "podman") + " " + pick("rm -f db", "rmi x", "container rm x", "system prune -af", "volume prune")
		case 12:
			c = pick("npm", "pnpm", "yarn") + " publish" + pick("", " --tag beta", " --access public")
		case 13:
			c = "find " + pick(paths...) + " " + pick("-delete", "-name '*.o' -delete", "-exec rm {} +")
		case 14:
			c = pick("env FOO=1", "nice -n 10", "timeout 10", "xargs", "nohup", "bash -c", "sh -c") + " " + pick("rm -rf "+pick(paths...), "git push -f", "dd if=x of=y")
		default:
			c = pick("echo ok && ", "cd dist; ", "make && ", "") + "rm -rf " + pick(paths...)
		}
		out = append(out, c)
	}
	return out
}

// The floor under "always": no suggestion for a destructive command, nor
// for any other, matches `rm -rf /` or `rm -rf ~`, and none allows a
// destructive form through a wildcard.
func TestProposeNeverWidensDestructive(t *testing.T) {
	cmds := destructiveCommands(2000)
	cmds = append(cmds, "ls /usr/bin/rm", "/usr/bin/ls", "./x.sh", "echo ok", "go test ./...", "git status", "make")
	for _, c := range cmds {
		if len(DestructiveIn(c)) == 0 && strings.Contains(c, "rm -rf") && !strings.HasPrefix(c, "echo") {
			t.Fatalf("%q reads as harmless", c)
		}
		checkProposal(t, c)
	}
}

func checkProposal(t *testing.T, command string) {
	t.Helper()
	for _, tool := range []string{"Bash", "bash", "Shell"} {
		pat, ok := Propose(tool, command)
		if !ok || pat == "" {
			continue
		}
		p, err := Compile(pat, false)
		if err != nil {
			t.Fatalf("Propose(%q) = %q: %v", command, pat, err)
		}
		for _, victim := range []string{"rm -rf /", "rm -rf ~", "rm -rf ~/", "sudo rm -rf /"} {
			if victim != strings.TrimSpace(command) && (p.Safe(victim) || p.Match(victim)) {
				t.Fatalf("Propose(%s, %q) = %q matches %q", tool, command, pat, victim)
			}
		}
		if fs := WildDestructive(Rule{Effect: Allow, Tool: tool, Args: pat}); len(fs) > 0 {
			t.Fatalf("Propose(%s, %q) = %q allows %v through a wildcard", tool, command, pat, fs)
		}
		if len(DestructiveIn(command)) > 0 && !p.plain {
			t.Fatalf("Propose(%s, %q) = %q: a destructive command widened", tool, command, pat)
		}
	}
}

// FuzzProposeNeverWidens is TestProposeNeverWidensDestructive over any
// command line.
func FuzzProposeNeverWidens(f *testing.F) {
	for _, c := range destructiveCommands(40) {
		f.Add(c)
	}
	for _, c := range []string{"go test ./...", "/usr/bin/ls", "git --no-pager log", "env X=1 make", "a=b c"} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, command string) {
		if len(command) > 1000 {
			return
		}
		checkProposal(t, command)
	})
}

func ExampleDestructiveIn() {
	fmt.Println(DestructiveIn("cd build && sudo rm -rf ./out"))
	// Output: [sudo (sudo rm -rf /) rm (rm -rf /)]
}
