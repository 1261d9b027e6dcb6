#!/usr/bin/env bash
# Builds HashiCorp Vault (the server, with its built-in JWT auth method)
# from the Go module proxy at the version of tools/vault/version into
# DIR/vault/VERSION/vault, for the test of Vault dynamic provider
# credentials (internal/e2e TestVaultDynamicCredentials), which starts it
# in dev mode. A binary already there is kept, so a second run costs a
# stat.
#
#   tools/vault/build.sh [DIR]     # default: .cache (make vault)
#
# Vault's go.mod points its api and sdk modules at folders of its own
# repository, which the module's archive leaves out; the build uses the
# released api and sdk modules its go.mod requires instead (the build
# copies the module to a scratch folder and drops those replace lines).
# Not every release builds so: a release's own sdk folder often differs
# from every sdk module released (1.20.0 and 1.21.4 do not compile with
# any the proxy serves); 1.19.0 with sdk v0.15.2 does.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.cache}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
v=$(sed -n 's/^vault[[:space:]]\+//p' tools/vault/version)
[ -n "$v" ] || { echo "tools/vault/version names no version" >&2; exit 1; }
out="$dir/vault/$v/vault"
if [ -x "$out" ]; then echo "vault $v: $out (cached)"; exit 0; fi
echo "vault $v: building from the Go module proxy (many minutes on a cold Go cache)"
src=$(go mod download -json "github.com/hashicorp/vault@v$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] || { echo "could not download github.com/hashicorp/vault@v$v" >&2; exit 1; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work" && rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
sed -i -E '/^replace github\.com\/hashicorp\/vault\/(api|sdk)([/ ]|$)/d' "$work/go.mod"
mkdir -p "$(dirname "$out")"
# The build resolves hundreds of modules; a dropped connection to the proxy
# or the checksum database fails it, so it is tried again.
for try in 1 2 3; do
  (cd "$work" && GOFLAGS=-mod=mod go build -trimpath -ldflags='-s -w' -o "$out.tmp" .) && break
  [ "$try" = 3 ] && { echo "building vault $v failed" >&2; exit 1; }
  echo "vault $v: the build failed (try $try of 3); trying again" >&2
done
"$out.tmp" version >/dev/null || { echo "the built vault does not start: $out.tmp" >&2; exit 1; }
mv "$out.tmp" "$out"
echo "vault $v: $out (built in $SECONDS s)"
