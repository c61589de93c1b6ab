#!/usr/bin/env bash
# One device call's worth of GPU work (run on the H200 through the device tool, from the repo root):
#   1. the conformance suite on backend=cuda (every kernel, every dtype, against the NumPy oracles),
#   2. the emitter's own GPU tests (tests/codegen),
#   3. scripts/gpu_bench.py: exp 256M vs the copy ceiling and torch, launch overhead, graph replay,
#   4. when .gl/ and .whl/ were carried (scripts/gpu_prepare.sh, device tool carry [".gl", ".whl"]): the conformance
#      suite on NVIDIA's Vulkan driver and exp/softmax timed on Vulkan beside CUDA.
# Results go to $OUT (or ./gpu-out): pytest logs and gpu_bench.json, to be committed under bench/results/.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 IRON_CACHE_DIR=/tmp/iron-cache IRON_GIT_SHA=${IRON_GIT_SHA:-unknown}
PY=${PY:-python3}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  $PY -c 'import cuda.core, cuda.bindings, torch, numpy; print("cuda.core", cuda.core.__version__, "bindings", cuda.bindings.__version__, "torch", torch.__version__, "numpy", numpy.__version__)'
  $PY -c 'from iron.codegen import nvrtc; print("nvrtc", nvrtc.nvrtc_version())'
} 2>&1 | tee "$OUT/env.txt"
IRON_TEST_BACKENDS=cuda timeout 300 $PY -m pytest -q -p no:cacheprovider tests/frontend/test_kernels.py tests/codegen \
  --maxfail=30 -rs 2>&1 | tee "$OUT/pytest_cuda.txt" | tail -n 40
timeout 240 $PY scripts/gpu_bench.py "$OUT/gpu_bench.json" 2>&1 | tee "$OUT/bench.txt"
if [ -d .gl ] && [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=$PYTHONPATH:/tmp/site
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  J=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  [ -f "$J" ] && export VK_DRIVER_FILES=$J
  IRON_TEST_BACKENDS=vulkan timeout 300 $PY -m pytest -q -p no:cacheprovider tests/frontend/test_kernels.py \
    --maxfail=30 -rs 2>&1 | tee "$OUT/pytest_vulkan.txt" | tail -n 20
  timeout 120 $PY bench/experiments/vulkan_vs_cuda.py "$OUT/vulkan_vs_cuda.json" 2>&1 | tail -n 20
fi
