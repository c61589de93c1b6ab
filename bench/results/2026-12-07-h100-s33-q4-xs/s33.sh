#!/bin/bash
# session 33: gemv_q4_xs (x in registers; X8: dp4a on 15-bit fixed-point x) against gemv_q_warp's best two, from the
# tree in .snap/new (cwd there: gemv_q4_configs.py puts ./src first), round 1 then 2; then vkab (main tree) if time
FINAL=${OUT:-gpu-out}; mkdir -p "$FINAL"
cd .snap/new
export PYTHONUNBUFFERED=1 IRON_CACHE_DIR=/tmp/iron-cache-s33
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$FINAL/env.txt"
for ROUND in ${ROUNDS:-1 2}; do
  Q4_PATH=xs Q4_SHAPES="16384,16384;4096,4096;14336,4096" timeout 100 python3 bench/experiments/gemv_q4_configs.py \
    > "$FINAL/q4xs_xs_$ROUND.txt" 2>&1
  Q4_WARP="4,1,8,1;4,1,4,1" Q4_SHAPES="16384,16384;4096,4096;14336,4096" timeout 60 python3 \
    bench/experiments/gemv_q4_configs.py > "$FINAL/q4xs_warp_$ROUND.txt" 2>&1
  grep -hE "GB/s|torch|rror" "$FINAL/q4xs_xs_$ROUND.txt" "$FINAL/q4xs_warp_$ROUND.txt" | sed "s/^/$ROUND /"
done
