#!/usr/bin/env bash
# session 27 call 5: top-k's row merge: base (the root, ddb7d38) / A (values made from keys) / B (A + one-step merge by
# ranks), bench/experiments/topk_paths.py on normal logits and on the bench's, each tree in turn, twice
set -u
R=$OUT; nvidia-smi --query-gpu=name --format=csv,noheader
for round in 1 2; do
  for T in base A B; do
    D=.snap/$T; [ $T = base ] && D=.
    for I in randn $([ $round = 1 ] && echo bench); do
      (cd $D && PYTHONPATH=$PWD/src IRON_CACHE_DIR=/tmp/iron-cache-$T TOPK_INPUT=$I timeout 100 python3 bench/experiments/topk_paths.py > $R/topk_paths_${T}_${I}_$round.txt 2>&1; grep -E "filterv EPT 64|filter EPT 64|Error|False" $R/topk_paths_${T}_${I}_$round.txt | sed "s/^/$round $T $I /")
    done
  done
done
