#!/usr/bin/env bash
# Builds the project's one Python virtual environment, .venv, for test dependencies from PyPI
# (Debian's python3-torch/numpy stay visible through --system-site-packages).
#
#   scripts/make-venv.sh          # creates or updates .venv; a no-op when tests/requirements.txt is unchanged
#   .venv/bin/python -m moto.server ...
#
# Idempotent and fast when done: the installed requirements' hash is kept in .venv/.requirements.sha256.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${FT_VENV:-$root/.venv}"
req="$root/tests/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
# Serialise concurrent callers (CTest fixtures of parallel test runs).
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "make-venv: installing tests/requirements.txt into $venv"
# A venv whose creation was interrupted has a python but no pip: made again.
if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  echo "make-venv: $venv has no pip (its creation was interrupted?): making it again"
  rm -rf "$venv"
fi
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
echo "$want" > "$stamp"
