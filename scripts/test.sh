#!/usr/bin/env bash
# The test suite: set up, lint (ruff, then the import contracts), then pytest (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check src tests
.venv/bin/lint-imports  # the layers and no-cycles contracts in pyproject.toml
# one worker a CPU (IRON_TEST_WORKERS=0: in this process), a test file's tests on one worker (module-level caches such as
# tests/backends' compile batches are built once); CI's two cores took 42-85 min in one process
.venv/bin/python -m pytest -n "${IRON_TEST_WORKERS:-auto}" --dist loadfile "$@"
