#!/usr/bin/env bash
# release/image.sh [TAG]: build the aep-kimi container image (default tag
# localhost/aep-kimi:VERSION) from release/Containerfile, pulling nothing:
# the static binaries are built here with this machine's Go, the CA
# certificates are the host's, and the image starts from scratch.
#
# The binaries are the release's own for linux/GOARCH (go run ./release/dist
# -binaries): the same version rule, flags and stamps as the archives.
#
# Environment:
#   AEP_KIMI_VERSION  the version (default: as release/dist finds it)
#   GOARCH            the image's architecture (default: go env GOARCH)
#   CONTAINER_TOOL    the builder and its global flags (default: buildah, else
#                     podman, else docker), e.g. "buildah --storage-driver vfs"
#   CA_BUNDLE         the certificates copied in (default: Debian's
#                     /etc/ssl/certs/ca-certificates.crt)
#   CONTEXT_ONLY      a directory: lay the build context out there and stop
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "release/image.sh: $*" >&2; exit 1; }

version="$(go run ./release/dist -print-version)"
arch="${GOARCH:-$(go env GOARCH)}"
# A tag takes no "+": semver's build metadata becomes "_".
tag="${1:-localhost/aep-kimi:${version//+/_}}"
ca="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
[ -r "$ca" ] || die "no CA bundle at $ca (install ca-certificates, or set CA_BUNDLE)"

# The uid the image runs as (USER in the Containerfile): not root, and no
# uid a host account is likely to have.
uid=65532

if [ -n "${CONTEXT_ONLY:-}" ]; then
  ctx="$CONTEXT_ONLY"
  mkdir -p "$ctx"
else
  ctx="$(mktemp -d)"
  trap 'rm -rf "$ctx"' EXIT
fi
root="$ctx/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp" "$ctx/home"
chmod 1777 "$root/tmp"
chmod 0700 "$ctx/home"

go run ./release/dist -binaries -version "$version" -platforms "linux/$arch" -o "$ctx/bin"
mv "$ctx/bin/linux_$arch/"* "$root/usr/local/bin/"
rm -rf "$ctx/bin"

cp "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
chmod 0644 "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\naep:x:%d:%d:aep-kimi:/aep:/sbin/nologin\n' "$uid" "$uid" >"$root/etc/passwd"
printf 'root:x:0:\naep:x:%d:\n' "$uid" >"$root/etc/group"
cp release/Containerfile "$ctx/Containerfile"

if [ -n "${CONTEXT_ONLY:-}" ]; then
  echo "$ctx"
  exit 0
fi

if [ -n "${CONTAINER_TOOL:-}" ]; then
  read -r -a tool <<<"$CONTAINER_TOOL"
elif command -v buildah >/dev/null; then
  tool=(buildah)
elif command -v podman >/dev/null; then
  tool=(podman)
elif command -v docker >/dev/null; then
  tool=(docker)
else
  die "no buildah, podman or docker on the PATH"
fi

args=(build --build-arg "VERSION=$version" -f "$ctx/Containerfile" -t "$tag")
case "$(basename "${tool[0]}")" in
  buildah|podman)
    # Docker's format keeps the HEALTHCHECK (OCI's has none); the commit's
    # time for every file and the image's creation, so a commit builds the
    # same layers.
    args+=(--format docker --platform "linux/$arch")
    if ts="$(git log -1 --format=%ct 2>/dev/null)"; then args+=(--timestamp "$ts"); fi
    ;;
  docker)
    args+=(--platform "linux/$arch")
    ;;
esac
"${tool[@]}" "${args[@]}" "$ctx" >&2
echo "$tag"
