#!/usr/bin/env bash
# Builds the OpenID provider the sign-in tests sign in against: the example
# server of github.com/zitadel/oidc (a real, standard OpenID provider:
# discovery, authorization code with PKCE, signed ID tokens), from the Go
# module proxy, at the version of tools/oidcprovider/version, into
# <dir>/<version>/oidc-provider. A binary already there is kept.
#
#   tools/oidcprovider/build.sh [DIR]     # default: .cache/oidc-provider
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.cache/oidc-provider}
v=$(tr -d '[:space:]' < tools/oidcprovider/version)
out="$dir/$v/oidc-provider"
if [ -x "$out" ]; then echo "oidc-provider $v: $out (cached)"; exit 0; fi
echo "oidc-provider $v: building github.com/zitadel/oidc/v3/example/server from the Go module proxy"
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/oidc-provider"
# The example lives inside the zitadel/oidc module: build it there, with
# that module's own go.mod and go.sum.
src=$(go mod download -json "github.com/zitadel/oidc/v3@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] || { echo "could not download github.com/zitadel/oidc/v3@$v" >&2; exit 1; }
(cd "$src" && GOFLAGS=-mod=readonly go build -o "$out.tmp" ./example/server)
mv "$out.tmp" "$out"
echo "oidc-provider $v: $out (built in $SECONDS s)"
