#!/usr/bin/env bash
# The differential fuzzer: random kernels on the interpreter (the reference) and on every other backend present,
# every output compared (tests/fuzz/runner.py says how).
#   scripts/fuzz.sh [N] [--backends vulkan,msl-cpu] [--seed S] [--kind ir|source|both] [--jobs J] [--out DIR]
#                  [--max-seconds T] [-v]
# N kernels (default 200), split between the IR generator and the Python-source generator; a fresh first seed
# unless --seed (printed, so a run can be replayed); reproducers of failures go to --out (IRON_FUZZ_DIR, default
# /tmp/iron-fuzz-failures). Exit status 1 on any mismatch, internal error or hang (a launch past IRON_VULKAN_TIMEOUT:
# its own outcome; the worker is replaced, as is one that dies).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || ./scripts/setup.sh
exec .venv/bin/python -m tests.fuzz.runner "$@"
