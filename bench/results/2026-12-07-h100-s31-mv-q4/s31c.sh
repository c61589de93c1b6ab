#!/usr/bin/env bash
# session 31 (short form, ~7 min): mv_q4 (the weight rows as mma.sync's A) checked on CUDA, then gemv_q4_mv's
# configurations timed alone beside gemv_q_warp's (bench/experiments/gemv_q4_configs.py, Q4_PATH=mv / warp, GPU
# time, L2 flushed, 16384^2 then 4096^2 and 14336 x 4096), twice. Packed into $OUT/s31c.tgz after each step.
set -u
R=/tmp/s31c; mkdir -p $R; PY=python3
pk() { tar -czf $OUT/s31c.tgz -C $R . ; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee $R/gpu.txt; date -u | tee -a $R/gpu.txt
cat .snap/sha.txt | tee -a $R/gpu.txt
(PYTHONPATH=$PWD/src IRON_TEST_BACKENDS=cuda timeout 100 $PY -m pytest -p no:cacheprovider -q tests/frontend/test_mv_q4.py \
  tests/std/test_quant_gemv_speed_paths.py -k "mv" 2>&1 | tail -n 12) | tee $R/pytest_mv_cuda.txt; pk
q4() {  # tag path shapes timeout
  (PYTHONPATH=$PWD/src IRON_CACHE_DIR=/tmp/ic-$1 Q4_PATH=$2 Q4_SHAPES="$3" timeout $4 $PY \
    bench/experiments/gemv_q4_configs.py > $R/q4_$1.txt 2>&1; grep -E "GB/s|torch|rror|ault" $R/q4_$1.txt | head -n 30 | sed "s/^/$1 /"); pk
}
q4 mv1 mv "16384,16384" 60
q4 warp1 warp "16384,16384" 60
q4 mv2 mv "16384,16384;4096,4096;14336,4096" 80
q4 warp2 warp "16384,16384" 50
