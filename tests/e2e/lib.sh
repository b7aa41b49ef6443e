# Helpers for end-to-end tests: run the real binary, check exit codes and messages.
set -euo pipefail
FT=${FLUXTRAIN:?set FLUXTRAIN to build/fluxtrain}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_error "substring" cmd...: the command must exit non-zero with the substring on stderr
# and print a one-line "error:" plus a "hint:".
expect_error() {
  local want=$1; shift
  local out rc=0
  out=$("$@" 2>&1 >/dev/null) || rc=$?
  [ $rc -ne 0 ] || fail "expected failure of: $*"
  grep -qF -- "$want" <<<"$out" || fail "expected '$want' in: $out"
  grep -q '^error: ' <<<"$out" || fail "no 'error:' line in: $out"
  echo "ok: $* -> $(grep '^error: ' <<<"$out" | head -1)"
}
