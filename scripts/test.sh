#!/usr/bin/env bash
# The test suite: set up, lint, then pytest (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check src tests
.venv/bin/python -m pytest "$@"
