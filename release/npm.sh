#!/usr/bin/env bash
# release/npm.sh OUTDIR [PLATFORM...]: the npm packages of one version, as
# `npm pack` tarballs in OUTDIR.
#
#   aep-kimi-VERSION.tgz            the main package: the three commands as
#                                   Node launchers (release/npm/package),
#                                   the five platform packages as optional
#                                   dependencies
#   aep-kimi-PLATFORM-VERSION.tgz   @aep-kimi/PLATFORM: kimi-hook, aep-kimi
#                                   and aep-setup built for it, with os and
#                                   cpu set so npm installs only the one
#                                   that fits
#
# PLATFORM is one of linux-x64 linux-arm64 darwin-x64 darwin-arm64 win32-x64
# (Node's process.platform-process.arch); none names all five. The main
# package is the same whichever are built. The version and the binaries
# are the release's, from release/dist: $AEP_KIMI_VERSION, else `git
# describe` of a v* tag, else 0.0.0-dev.<commit>, "-dirty" marking
# uncommitted changes; static binaries built with -trimpath, stamped with
# the version, the commit and its date. The same commit, version and Go
# give byte-identical tarballs (npm pack fixes every file's time and
# owner).
#
# $AEP_KIMI_DIST_BINARIES, when set, is a directory `release/dist
# -keep-binaries` filled for this version: its binaries are packaged rather
# than built again.
#
# Needs go and npm. Nothing is fetched but the Go modules.
set -euo pipefail

all_platforms=(linux-x64 linux-arm64 darwin-x64 darwin-arm64 win32-x64)
commands=(aep-kimi kimi-hook aep-setup) # the main package's bin entries
scope=@aep-kimi
repo_url=git+https://github.com/aep-kimi/aep-kimi.git

die() { echo "npm.sh: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "usage: release/npm.sh OUTDIR [PLATFORM...] (platforms: ${all_platforms[*]})"
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
shift
platforms=("$@")
[ ${#platforms[@]} -gt 0 ] || platforms=("${all_platforms[@]}")
for p in "${platforms[@]}"; do
  [[ " ${all_platforms[*]} " == *" $p "* ]] || die "unknown platform $p (want one of: ${all_platforms[*]})"
done

cd "$root"
# The binaries and the version are the release's (release/dist): the same
# bytes as in the archives. The environment is spelled out so the caller's
# GOFLAGS, GOAMD64 or GOEXPERIMENT cannot change them.
dist() {
  env GOFLAGS=-buildvcs=false GOAMD64=v1 GOARM64=v8.0 GOEXPERIMENT= go run ./release/dist "$@"
}
version="$(dist -print-version)"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
# The files' modes are the tarballs' modes: fix them whatever the umask.
umask 022

# pack runs npm pack in dir, into OUTDIR, and prints the tarball's name.
pack() {
  (cd "$1" && npm pack --silent --ignore-scripts --loglevel=error --pack-destination "$out") | tail -n1
}

targets=""
for p in "${platforms[@]}"; do
  os="${p%-*}" cpu="${p#*-}"
  targets="$targets${targets:+,}${os/win32/windows}/${cpu/x64/amd64}"
done
if [ -n "${AEP_KIMI_DIST_BINARIES:-}" ]; then
  # The binaries a release build kept (dist -keep-binaries): the archives'
  # own bytes, if they are this version's.
  kept="$(cat "$AEP_KIMI_DIST_BINARIES/VERSION" 2>/dev/null || true)"
  [ "$kept" = "$version" ] || die "\$AEP_KIMI_DIST_BINARIES holds version '${kept}', not $version"
  mkdir -p "$stage/dist"
  for t in ${targets//,/ }; do
    d="${t/\//_}"
    [ -d "$AEP_KIMI_DIST_BINARIES/$d" ] || die "\$AEP_KIMI_DIST_BINARIES has no $d"
    cp -R "$AEP_KIMI_DIST_BINARIES/$d" "$stage/dist/$d"
  done
else
  dist -binaries -o "$stage/dist" -platforms "$targets" -version "$version"
fi
for p in "${platforms[@]}"; do
  os="${p%-*}" cpu="${p#*-}"
  dir="$stage/$p"
  mkdir -p "$dir"
  mv "$stage/dist/${os/win32/windows}_${cpu/x64/amd64}" "$dir/bin"
  cat >"$dir/package.json" <<EOF
{
  "name": "$scope/$p",
  "version": "$version",
  "description": "The aep-kimi binaries (kimi-hook, aep-kimi, aep-setup) for $os $cpu; installed by the aep-kimi package.",
  "repository": { "type": "git", "url": "$repo_url" },
  "os": ["$os"],
  "cpu": ["$cpu"],
  "preferUnplugged": true
}
EOF
  printf '# %s/%s\n\nThe native binaries of [aep-kimi](https://www.npmjs.com/package/aep-kimi) for %s %s. Install `aep-kimi`, not this package.\n' \
    "$scope" "$p" "$os" "$cpu" >"$dir/README.md"
  echo "$out/$(pack "$dir")"
done

main="$stage/aep-kimi"
cp -R release/npm/package "$main"
optional=""
for p in "${all_platforms[@]}"; do
  optional="$optional${optional:+,
}    \"$scope/$p\": \"$version\""
done
bins=""
for c in "${commands[@]}"; do
  bins="$bins${bins:+,
}    \"$c\": \"bin/$c\""
done
cat >"$main/package.json" <<EOF
{
  "name": "aep-kimi",
  "version": "$version",
  "description": "Watch and steer Kimi Code agents at fleet scale: AEP events from every hook, a relay, a fleet page.",
  "repository": { "type": "git", "url": "$repo_url" },
  "homepage": "https://github.com/aep-kimi/aep-kimi#readme",
  "bin": {
$bins
  },
  "optionalDependencies": {
$optional
  },
  "engines": { "node": ">=18" }
}
EOF
chmod -R u=rwX,go=rX "$stage"
chmod 755 "$main"/bin/*
echo "$out/$(pack "$main")"
