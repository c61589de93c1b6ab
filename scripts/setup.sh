#!/usr/bin/env bash
# Create .venv and install Iron with its test extras (idempotent; re-installs when pyproject.toml changes).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && apt-get install -y -qq python3-venv python3-pip >/dev/null
    else
      echo "setup: Python's venv module is missing; install python3-venv" >&2; exit 1
    fi
  fi
  "$PY" -m venv .venv
fi
stamp=.venv/.iron-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
fi
