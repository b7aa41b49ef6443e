#!/bin/sh
# Runs a Python test with the project's test venv (.venv, made by scripts/make-venv.sh) when it
# exists, else with the system python3; the test itself exits 77 (skipped) if a module is missing.
py="$PROJECT_ROOT/.venv/bin/python"
[ -x "$py" ] || py=python3
exec "$py" "$@"
