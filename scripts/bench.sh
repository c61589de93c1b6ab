#!/usr/bin/env bash
# The main job: set up, then `iron bench` on the best backend present (extra arguments go to iron bench).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/iron bench "$@"
