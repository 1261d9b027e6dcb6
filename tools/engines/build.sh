#!/usr/bin/env bash
# Builds the engines listed in tools/engines/versions (OpenTofu, and
# terraform 1.5.7, the last MPL release) from the Go module proxy into an
# engines folder laid out as the server's --engines-dir wants
# (<dir>/<name>/<version>/<name>). A binary already there that reports the
# right version is kept, so a second run costs only a version check.
#
#   tools/engines/build.sh [DIR]     # default: .cache/engines (make engines)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.cache/engines}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# have NAME VERSION: the binary is in place and reports VERSION. The output
# is read whole before it is matched: piped into `grep -q`, which exits at
# the first match, terraform's second write could meet a closed pipe, and
# under pipefail its SIGPIPE failed the check of a good binary (1 in 4 on a
# fresh machine).
have() {
  local bin="$dir/$1/$2/$1" out
  [ -x "$bin" ] || return 1
  out=$("$bin" version -json 2>/dev/null) || return 1
  [[ $out == *"\"$2\""* ]]
}

build() {
  local name=$1 v=$2 out="$dir/$1/$2/$1" src
  if have "$name" "$v"; then echo "$name $v: $out (cached)"; return; fi
  echo "$name $v: building from the Go module proxy (minutes on a cold Go cache)"
  local start=$SECONDS
  mkdir -p "$(dirname "$out")"
  case $name in
  tofu)
    # OpenTofu's go.mod has replace directives, so `go install pkg@version`
    # refuses it: build inside the downloaded module, where they apply.
    src=$(go mod download -json "github.com/opentofu/opentofu@v$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -n "$src" ] || { echo "could not download github.com/opentofu/opentofu@v$v" >&2; exit 1; }
    (cd "$src" && GOFLAGS=-mod=readonly go build -ldflags "-X github.com/opentofu/opentofu/version.dev=no" -o "$out.tmp" ./cmd/tofu)
    mv "$out.tmp" "$out" ;;
  terraform)
    GOBIN="$(dirname "$out")" go install "github.com/hashicorp/terraform@v$v" ;;
  *)
    echo "tools/engines/versions names an unknown engine: $name" >&2; exit 1 ;;
  esac
  have "$name" "$v" || { echo "the built $name does not report version $v:" >&2; "$out" version >&2; exit 1; }
  echo "$name $v: $out (built in $((SECONDS - start)) s)"
}

while read -r name v; do
  case $name in ''|'#'*) continue ;; esac
  build "$name" "$v"
done < tools/engines/versions
