#!/usr/bin/env bash
# The test suite: set up, lint (ruff, then the import contracts), then pytest (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check src tests
.venv/bin/lint-imports  # the layers and no-cycles contracts in pyproject.toml
.venv/bin/python -m pytest "$@"
