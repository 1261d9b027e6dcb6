#!/usr/bin/env bash
# Builds Gitea (a git server with an API and webhooks) from the Go module
# proxy at the version of tools/gitea/version into DIR/gitea/VERSION/gitea,
# for the tests of VCS-driven workspaces (internal/testenv StartGitea,
# internal/vcshost). A binary already there is kept, so a second run costs
# a stat.
#
#   tools/gitea/build.sh [DIR]     # default: .cache (make gitea)
#
# It is built as Gitea's Makefile builds it, with SQLite (cgo: a C
# compiler is needed) and without the bindata tag, so the server reads
# options/, templates/ and public/ from its static root at run time: they
# are copied from the module beside the binary, which the tests name as
# STATIC_ROOT_PATH. public/ holds no built front end (the module has only
# its images): the API, git over HTTP and webhooks work; pages lack
# scripts and styles.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.cache}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
v=$(sed -n 's/^gitea[[:space:]]\+//p' tools/gitea/version)
[ -n "$v" ] || { echo "tools/gitea/version names no version" >&2; exit 1; }
out="$dir/gitea/$v/gitea"
if [ -x "$out" ]; then echo "gitea $v: $out (cached)"; exit 0; fi
echo "gitea $v: building from the Go module proxy (minutes on a cold Go cache)"
src=$(go mod download -json "code.gitea.io/gitea@v$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] || { echo "could not download code.gitea.io/gitea@v$v" >&2; exit 1; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work" && rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
mkdir -p "$(dirname "$out")"
tags="sqlite sqlite_unlock_notify"
# The build resolves hundreds of modules; a dropped connection to the proxy
# or the checksum database fails it, so it is tried again.
for try in 1 2 3; do
  (cd "$work" && CGO_ENABLED=1 go build -trimpath -tags "$tags" \
    -ldflags "-s -w -X 'main.Version=$v' -X 'main.Tags=$tags'" -o "$out.tmp" .) && break
  [ "$try" = 3 ] && { echo "building gitea $v failed" >&2; exit 1; }
  echo "gitea $v: the build failed (try $try of 3); trying again" >&2
done
for d in options templates public; do
  rm -rf "${out%/*}/$d"
  if [ -d "$work/$d" ]; then cp -r "$work/$d" "${out%/*}/$d"; fi
done
"$out.tmp" --version | grep -q "version $v " || { echo "the built gitea does not start: $out.tmp" >&2; exit 1; }
mv "$out.tmp" "$out"
echo "gitea $v: $out (built in $SECONDS s)"
