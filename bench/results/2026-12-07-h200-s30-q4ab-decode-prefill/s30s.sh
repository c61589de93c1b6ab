#!/usr/bin/env bash
# session 30: s29's q4 GEMV change (nibble pairs shifted high into f32 mantissas; this tree) against 866e064
# (.snap/old), each tree's gemv_q_warp configurations timed alone (bench/experiments/gemv_q4_configs.py,
# Q4_PATH=warp), after the quant tests on CUDA; iron bench rows for q4 GEMV, then a second A/B round, then decode and
# prefill on CUDA (H200 absolutes), q4 on NVIDIA's Vulkan. Results packed into $OUT/s30.tgz after each step.
set -u
R=/tmp/s30; mkdir -p $R; PY=python3
pk() { tar -czf $OUT/s30.tgz -C $R . ; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $R/gpu.txt; date -u | tee -a $R/gpu.txt
git log -1 --format=%H 2>/dev/null | tee -a $R/gpu.txt
(PYTHONPATH=$PWD/src IRON_TEST_BACKENDS=cuda timeout 90 $PY -m pytest -p no:cacheprovider -q tests/std/test_quant.py \
  tests/std/test_quant_gemv_speed_paths.py 2>&1 | tail -n 6) | tee $R/pytest_quant_cuda.txt; pk
q4() {  # round tree shapes
  D=.snap/old; [ $2 = new ] && D=.
  (cd $D && PYTHONPATH=$PWD/src IRON_CACHE_DIR=/tmp/ic-$2 Q4_PATH=warp Q4_SHAPES="$3" timeout 90 $PY \
    bench/experiments/gemv_q4_configs.py > $R/q4_$2_$1.txt 2>&1; grep -E "GB/s|torch|rror" $R/q4_$2_$1.txt | head -n 40 \
    | sed "s/^/$1 $2 /"); pk
}
q4 1 old "16384,16384;4096,4096"; q4 1 new "16384,16384;4096,4096"
GPU_RAW=/tmp/lib-raw FINAL=$R/lib LIB_TAG=_cuda LIB_BACKEND=cuda LIB_TIMEOUT=90 \
  LIB_KERNELS="std/quant/gemv_q4" bash scripts/gpu_check.sh lib; cp /tmp/lib-raw/* $R/ 2>/dev/null; pk

GPU_RAW=/tmp/lib2-raw FINAL=$R/lib2 LIB_TAG=_cuda LIB_BACKEND=cuda LIB_TIMEOUT=100 \
  LIB_KERNELS="std/attention/decode" bash scripts/gpu_check.sh lib; cp /tmp/lib2-raw/* $R/ 2>/dev/null; pk


