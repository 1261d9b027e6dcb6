#!/usr/bin/env bash
# Runs one fuzz target for a fixed time: tools/fuzz.sh GO PKG FUNC FUZZTIME
#
# Go 1.26's fuzz coordinator has a race at the end of a duration-based
# -fuzztime (go.dev/issue/75804, fixed in Go 1.27): the deadline can escape as
# "--- FAIL: FuzzX ... context deadline exceeded" with no failing input. That
# outcome, and only that one (no "Failing input written", no new file under the
# package's testdata/fuzz), is run once more; any other failure, or the same
# outcome twice in a row, fails.
set -uo pipefail
go=$1 pkg=$2 fn=$3 fuzztime=$4
corpus="$pkg/testdata/fuzz/$fn"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for attempt in 1 2; do
  before=$(ls "$corpus" 2>/dev/null | sort)
  "$go" test -run '^$' -fuzz "^$fn\$" -fuzztime "$fuzztime" "./$pkg" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && exit 0
  after=$(ls "$corpus" 2>/dev/null | sort)
  if [ "$attempt" -eq 1 ] && [ "$before" = "$after" ] \
     && ! grep -q 'Failing input written' "$out" \
     && grep -A1 -E "^--- FAIL: $fn " "$out" | tail -n1 | grep -qx '[[:space:]]*context deadline exceeded'; then
    echo "== $fn: Go's fuzz coordinator reported its own deadline (go.dev/issue/75804), no failing input was found; running it again"
    continue
  fi
  exit "$rc"
done
