#!/usr/bin/env bash
# session 32 call 1: gemv_q4_mv's configurations (the staged NS >= 2 ones timed for the first time) and gemv_q_warp's,
# each alone, at 16384^2 bf16 group 64; mv_q4's tests on CUDA. Packed into $OUT/s32.tgz after each step.
set -u
R=/tmp/s32; mkdir -p $R; PY=python3
pk() { tar -czf $OUT/s32.tgz -C $R . ; }
cp .snap/sha.txt $R/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $R/gpu.txt; date -u | tee -a $R/gpu.txt
for P in mv warp; do
(PYTHONPATH=$PWD/src IRON_CACHE_DIR=/tmp/ic-q4 Q4_PATH=$P Q4_SHAPES="16384,16384" timeout 100 $PY \
  bench/experiments/gemv_q4_configs.py > $R/q4_cfg_$P.txt 2>&1; grep -E "GB/s|torch|rror" $R/q4_cfg_$P.txt | head -n 30); pk
done
(PYTHONPATH=$PWD/src IRON_TEST_BACKENDS=cuda timeout 60 $PY -m pytest -p no:cacheprovider -q -rfE tests/frontend/test_mv_q4.py \
  -k "not interp" 2>&1 | tail -n 6) | tee $R/pytest_mv.txt; pk
