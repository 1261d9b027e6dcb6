#!/usr/bin/env bash
# Builds versitygw (an S3-compatible gateway that can serve a plain folder)
# from the Go module proxy into DIR/versitygw/VERSION/versitygw, for the
# tests that exercise S3 blobs against a real S3 server (internal/blob,
# internal/e2e). A binary already there is kept, so a second run costs a
# stat.
#
#   tools/versitygw/build.sh [DIR]     # default: .cache (make versitygw)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.cache}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
v=$(sed -n 's/^versitygw[[:space:]]\+//p' tools/versitygw/version)
[ -n "$v" ] || { echo "tools/versitygw/version names no version" >&2; exit 1; }
out="$dir/versitygw/$v/versitygw"
if [ -x "$out" ]; then echo "versitygw $v: $out (cached)"; exit 0; fi
echo "versitygw $v: building from the Go module proxy (minutes on a cold Go cache)"
mkdir -p "$(dirname "$out")"
GOBIN="$(dirname "$out").tmp" go install "github.com/versity/versitygw/cmd/versitygw@v$v"
mv "$(dirname "$out").tmp/versitygw" "$out"
rmdir "$(dirname "$out").tmp"
"$out" --version >/dev/null 2>&1 || "$out" --help >/dev/null 2>&1 || { echo "the built versitygw does not start: $out" >&2; exit 1; }
echo "versitygw $v: $out (built in $SECONDS s)"
