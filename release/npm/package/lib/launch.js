"use strict";
// The launcher behind the aep-kimi package's three commands. It runs the
// native binary of the same name from the platform package npm installed
// beside this one (@aep-kimi/<platform>-<arch>, an optional dependency whose
// os and cpu fields let npm pick it), passing argv, stdio, the environment,
// the exit code and signals through.
//
// Where Node can replace its own process (process.execve, Node 22.15 and
// later on Unix), the binary takes over this process: the same pid, so
// signals, the exit status and the process group are the binary's own and
// nothing stays in between. Elsewhere (older Node, Windows) it runs the
// binary as a child, forwards the signals it receives and exits as the child
// did.
const path = require("path");

const scope = "@aep-kimi";

function fail(message) {
  process.stderr.write("aep-kimi (npm): " + message + "\n");
  process.exit(1);
}

// binary returns the absolute path of the native command.
function binary(name) {
  const pkg = scope + "/" + process.platform + "-" + process.arch;
  let dir;
  try {
    dir = path.dirname(require.resolve(pkg + "/package.json"));
  } catch {
    fail(
      pkg + " is not installed, so there is no native " + name + " to run. " +
        "Prebuilt binaries exist for linux and darwin (x64, arm64) and win32 (x64); " +
        "on those, npm skipped the optional dependency (--omit=optional, --no-optional or a lockfile " +
        "from another platform): reinstall with `npm install -g aep-kimi`. Elsewhere build from " +
        "source: `go install ./cmd/...` in a clone of https://github.com/aep-kimi/aep-kimi.",
    );
  }
  return path.join(dir, "bin", process.platform === "win32" ? name + ".exe" : name);
}

exports.run = function run(name) {
  const file = binary(name);
  const args = process.argv.slice(2);
  if (typeof process.execve === "function" && process.platform !== "win32") {
    try {
      process.execve(file, [file, ...args], process.env);
    } catch (err) {
      fail("cannot run " + file + ": " + err.message);
    }
  }
  spawnChild(file, args);
};

// The signals a child is told about: a terminal's Ctrl-C reaches the whole
// foreground group, a kill or a service manager's stop reaches this process
// only.
const forwarded = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"];

function spawnChild(file, args) {
  const { spawn } = require("child_process");
  const child = spawn(file, args, { stdio: "inherit" });
  const handlers = {};
  for (const sig of forwarded) {
    if (process.platform === "win32" && sig !== "SIGINT") continue;
    handlers[sig] = () => {
      // On Windows Ctrl-C reaches every process on the console: staying
      // alive until the child exits is all there is to do.
      if (process.platform !== "win32") child.kill(sig);
    };
    process.on(sig, handlers[sig]);
  }
  child.on("error", (err) => fail("cannot run " + file + ": " + err.message));
  child.on("exit", (code, signal) => {
    for (const sig of Object.keys(handlers)) process.removeListener(sig, handlers[sig]);
    if (signal) {
      // Die of the same signal, so whoever waits on us sees what the
      // binary's waiter would have.
      process.kill(process.pid, signal);
      return;
    }
    process.exit(code === null ? 1 : code);
  });
}
