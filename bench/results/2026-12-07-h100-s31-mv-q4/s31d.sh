#!/usr/bin/env bash
# session 31 call 3 (~3 min): iron bench -v on CUDA, bf16, for rows docs/kernels.md lists as not yet measured on the
# H200 as the code now is: layer_norm (16384 x 8192 target 3900 GB/s) and the vectorised silu (2^28 target 97 %).
set -u
R=/tmp/s31d; mkdir -p $R; PY=python3
pk() { tar -czf $OUT/s31d.tgz -C $R . ; }
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 IRON_CACHE_DIR=/tmp/iron-cache IRON_PROGRESS=lines
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt; cat .snap/sha.txt | tee -a $R/gpu.txt
b() {  # tag timeout filter
  timeout $2 $PY -m iron.cli.main bench --backend cuda -v --dtype bf16 --filter "$3" --json $R/$1.json > $R/$1.txt 2>&1
  grep "│" $R/$1.txt | grep -v "^│ kernel" | cut -c1-220 | sed "s/^/$1 /"; pk
}
b layer_norm 75 std/norm/layer_norm
b silu 60 std/elementwise/silu
