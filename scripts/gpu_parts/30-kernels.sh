# Parts of scripts/gpu_check.sh, sourced by it for each PART in the order of the file names (their usage is
# in its header): issue 18/16 kernel experiments (gemvq, topkncu, topksrc, vfixed, vstats, sized, lncfg, q4cfg, q4ab, q4xs,
# q4src, vkab).
if [ "$PART" = gemvq ]; then
  # issue 18: gemv_q_warp (a default tuning candidate since 2026-12-04) against its oracle on CUDA
  # and NVIDIA's Vulkan, then the q4/q8 GEMV rows beside torch with it in the running
  IRON_TEST_BACKENDS=cuda,vulkan timeout ${GQ_TIMEOUT:-150} $PY -m pytest -p no:cacheprovider -q \
    -rfEs tests/std/test_quant_gemv_speed_paths.py tests/std/test_quant.py tests/models/test_quantized.py \
    --maxfail=30 2>&1 | tee "$OUT/pytest_gemvq.txt" | tail -n 20
  pack
  IRON_PROGRESS=lines timeout ${GQ_BENCH_TIMEOUT:-150} $PY -m iron.cli.main bench --backend cuda -v \
    --dtype bf16 --filter std/quant/gemv_q --json "$OUT/lib_gemv_q_warp.json" 2>&1 | tee "$OUT/lib_gemv_q_warp.txt" \
    | grep "iron bench on"
  pack
fi
if [ "$PART" = topkncu ]; then
  # issue 18: each top-k path timed alone beside torch.topk (bench/experiments/topk_paths.py), then the paths in
  # TOPK_NCU (indices of topk.PATH_TUNING; default the two-launch and the one-launch radix at EPT 16) under ncu
  timeout ${TOPK_TIMEOUT:-120} $PY bench/experiments/topk_paths.py 2>&1 | tee "$OUT/topk_paths.txt" | tail -n 8
  for I in ${TOPK_NCU:-0 3}; do
    TOPK_ONLY=$I profile_ncu "topk_ncu_$I.txt" topk 2 2 bench/experiments/topk_paths.py
  done
  pack
fi
if [ "$PART" = topksrc ]; then
  # issue 18: the top-k paths in TOPK_NCU (default 9: filterv at 64 a thread) under Nsight Compute's source counters:
  # each SASS instruction's executions and warp-stall samples (--page source, CSV), to place the instruction count
  for I in ${TOPK_NCU:-9}; do
    TOPK_ONLY=$I timeout ${NCU_TIMEOUT:-120} ncu --kernel-name regex:topk --launch-skip 2 --launch-count 1 \
      --section SourceCounters --section WarpStateStats --section InstructionStats -f -o "$OUT/topk_src_$I" \
      $PY bench/experiments/topk_paths.py > "$OUT/topk_src_$I.log" 2>&1
    ncu -i "$OUT/topk_src_$I.ncu-rep" --page source --csv --print-source sass > "$OUT/topk_src_$I.csv" 2>&1
    ncu -i "$OUT/topk_src_$I.ncu-rep" --page details > "$OUT/topk_src_$I.txt" 2>&1
    tail -n 3 "$OUT/topk_src_$I.log"; wc -l "$OUT/topk_src_$I.csv"; head -c 600 "$OUT/topk_src_$I.csv"
  done
  pack
fi
if [ "$PART" = vfixed ]; then
  # issue 16: Vulkan's constant gap to CUDA: 1/2/4/8 back-to-back copy dispatches on both, fixed + each fitted
  timeout ${VKF_TIMEOUT:-150} $PY bench/experiments/vk_fixed_cost.py "$OUT/vk_fixed_cost.json" 2>&1 \
    | tee "$OUT/vk_fixed_cost.txt" | tail -n 20
  pack
fi

if [ "$PART" = vstats ]; then
  IRON_TEST_BACKENDS=vulkan timeout ${VSTATS_TIMEOUT:-120} $PY -m pytest -p no:cacheprovider -q -rs \
    tests/runtime_vulkan/test_pipeline_stats.py 2>&1 | tee "$OUT/pytest_vstats.txt" | tail -n 6
  for D in "INTERLEAVED=0 -D VEC=8 -D HPT=1" "INTERLEAVED=0 -D VEC=8 -D HPT=2" "INTERLEAVED=1 -D VEC=8 -D HPT=4"; do
    timeout 60 $PY -m iron.cli.main inspect iron.std.rope:rope --backend vulkan --resources --group 128 --dtype bf16 \
      -D $D >> "$OUT/vulkan_stats.txt" 2>&1
  done
  # issue 16: the split rows' chunk kernels (32 x 128256, EPT 8: 72-76 % of CUDA on Vulkan), both backends
  for K in iron.std.fused_norm:add_rms_norm_chunk_sums iron.std.norm:rms_norm_chunk_apply; do
    for B in vulkan cuda; do
      timeout 60 $PY -m iron.cli.main inspect $K --backend $B --resources --group 256 --dtype bf16 -D BLOCK=256 \
        -D VEC=8 -D PER=1 >> "$OUT/vulkan_stats.txt" 2>&1
    done
  done
  head -n 60 "$OUT/vulkan_stats.txt"
  # issue 14: the coopmat2 GEMM pipelines' registers and shared memory (how deep the driver's staging goes)
  timeout 90 $PY bench/experiments/vk_gemm_stats.py "$OUT/vk_gemm_stats.json" 2>&1 | tee "$OUT/vk_gemm_stats.txt" \
    | tail -n 8
  pack
fi
if [ "$PART" = sized ]; then
  timeout ${SIZED_TIMEOUT:-60} $PY bench/experiments/sized_copy.py "$OUT/sized_copy.json" 2>&1 \
    | tee "$OUT/sized_copy.txt" | tail -n 12
  pack
fi

if [ "$PART" = lncfg ]; then
  # issue 18: layer_norm's configurations alone (EPT x LATE, the persistent layer_norm_rows_ahead), cold, GPU time,
  # beside torch and the Triton peer; then its tests on CUDA
  timeout ${LN_TIMEOUT:-200} $PY bench/experiments/layer_norm_configs.py 2>&1 | tee "$OUT/layer_norm_configs.txt" \
    | tail -n 40
  pack
  IRON_TEST_BACKENDS=cuda,vulkan timeout ${LN_TEST_TIMEOUT:-120} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/std/test_layer_norm.py --maxfail=30 2>&1 | tee "$OUT/pytest_lncfg.txt" | tail -n 20
  pack
fi

if [ "$PART" = q4cfg ]; then
  # issue 18: mma_q4's and mv_q4's tests on CUDA, then every q4 GEMV configuration alone (gemv_q, gemv_q_warp, the
  # matrix-unit gemv_q4_mma), cold, GPU time, beside torch's dequantize + mv; Q4_PATHS="mv warp" times those paths'
  # configurations instead, one path after the other (gemv_q4_mv, path "mv", is forced only: not a tuned candidate)
  IRON_TEST_BACKENDS=cuda timeout ${Q4_TEST_TIMEOUT:-120} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/frontend/test_mma_q4.py tests/frontend/test_mv_q4.py tests/std/test_quant_gemv_speed_paths.py \
    --maxfail=30 2>&1 | tee "$OUT/pytest_q4cfg.txt" | tail -n 20
  pack
  if [ -z "${Q4_PATHS:-}" ]; then
    timeout ${Q4_TIMEOUT:-240} $PY bench/experiments/gemv_q4_configs.py 2>&1 | tee "$OUT/gemv_q4_configs.txt" | tail -n 40
    pack
  fi
  for P in ${Q4_PATHS:-}; do
    Q4_PATH=$P timeout ${Q4_TIMEOUT:-100} $PY bench/experiments/gemv_q4_configs.py 2>&1 \
      | tee "$OUT/gemv_q4_configs_$P.txt" | tail -n 40
    pack
  done
  for I in ${Q4_NCU:-}; do  # configuration indices of the first shape (gemv_q4_configs.txt) under Nsight Compute
    Q4_ONLY=$I profile_ncu "q4_ncu_$I.txt" gemv_q 2 1 bench/experiments/gemv_q4_configs.py
  done
  pack
fi
if [ "$PART" = q4ab ]; then
  # issue 18: gemv_q_warp's configurations (Q4_PATH=warp) from this tree and from a base tree carried at Q4_BASE
  # (default .snap/old: `git archive BASE src bench scripts | tar -x -C .snap/old`, carry .snap), in turn, twice,
  # Q4_SHAPES (default 16384^2 and 4096^2) -> q4ab_{base,new}_{1,2}.txt; each tree compiles into its own cache
  for ROUND in 1 2; do
    for TREE in base new; do
      D=${Q4_BASE:-.snap/old}; [ $TREE = new ] && D=.
      (cd "$D" && PYTHONPATH=$PWD/src IRON_CACHE_DIR=/tmp/iron-cache-q4$TREE Q4_PATH=warp \
        Q4_SHAPES="${Q4_SHAPES:-16384,16384;4096,4096}" timeout ${Q4_TIMEOUT:-100} $PY bench/experiments/gemv_q4_configs.py) \
        > "$OUT/q4ab_${TREE}_$ROUND.txt" 2>&1
      grep -E "GB/s|torch|rror" "$OUT/q4ab_${TREE}_$ROUND.txt" | sed "s/^/$ROUND $TREE /" | head -n 30
      pack
    done
  done
fi
if [ "$PART" = q4xs ]; then
  IRON_TEST_BACKENDS=cuda timeout ${Q4_TEST_TIMEOUT:-150} $PY -m pytest -q -p no:cacheprovider \
    tests/std/test_quant_gemv_speed_paths.py -k "xs or both_paths or registers" 2>&1 | tee "$OUT/pytest_q4xs.txt" | tail -n 5
  pack
  for ROUND in 1 2; do
    Q4_XS= Q4_PATH=xs Q4_SHAPES="${Q4_SHAPES:-16384,16384;4096,4096;14336,4096}" timeout ${Q4_TIMEOUT:-90} \
      $PY bench/experiments/gemv_q4_configs.py > "$OUT/q4xs_xs_$ROUND.txt" 2>&1
    Q4_WARP="${Q4_WARP:-4,1,8,1;4,1,4,1}" Q4_SHAPES="${Q4_SHAPES:-16384,16384;4096,4096;14336,4096}" \
      timeout ${Q4_TIMEOUT:-90} $PY bench/experiments/gemv_q4_configs.py > "$OUT/q4xs_warp_$ROUND.txt" 2>&1
    # xs configurations of one's own (R,MOST,X8[,NS];...; default: X8 = 1 and 2 at R 8, the staged kernel's)
    Q4_XS="${Q4_XS-8,16,1;8,16,2;4,16,1,3;2,16,1,6;4,16,1,4;8,16,1,2;4,16,2,3;2,16,2,6}"
    if [ -n "$Q4_XS" ]; then
      Q4_XS="$Q4_XS" Q4_SHAPES="${Q4_SHAPES:-16384,16384;4096,4096;14336,4096}" timeout ${Q4_TIMEOUT:-90} \
        $PY bench/experiments/gemv_q4_configs.py > "$OUT/q4xs_own_$ROUND.txt" 2>&1
    fi
    grep -hE "GB/s|torch|rror" "$OUT"/q4xs_*_$ROUND.txt | sed "s/^/$ROUND /" | head -n 60
    pack
  done
  for I in ${Q4_NCU:-}; do  # xs configuration indices (xs_configs' CUDA table) under Nsight Compute, 16384^2
    Q4_XS= Q4_PATH=xs Q4_ONLY=$I Q4_SHAPES=16384,16384 profile_ncu "q4xs_ncu_$I.txt" gemv_q 2 1 bench/experiments/gemv_q4_configs.py
    pack
  done
  if [ -n "${Q4_NCU_WARP:-}" ]; then  # gemv_q_warp's R 4 WARPS 4 NS 1 beside it
    Q4_XS= Q4_WARP="4,1,4,1" Q4_ONLY=0 Q4_SHAPES=16384,16384 profile_ncu q4xs_ncu_warp.txt gemv_q 2 1 bench/experiments/gemv_q4_configs.py
    pack
  fi
fi
if [ "$PART" = q4src ]; then
  Q4SRC_XS="${Q4SRC_XS:-8,16,2;4,16,1,3;8,16,2,2;4,16,2,3}"
  Q4SRC_SHAPES="${Q4SRC_SHAPES:-16384,16384;32768,16384}"
  for FL in ${Q4SRC_FLUSH:-read memset}; do  # memset: the backend's flush (dirty lines); read: a 256 MiB read
    Q4_FLUSH=$FL Q4_XS="$Q4SRC_XS" Q4_SHAPES="$Q4SRC_SHAPES" timeout ${Q4_TIMEOUT:-90} \
      $PY bench/experiments/gemv_q4_configs.py > "$OUT/q4src_xs_$FL.txt" 2>&1
    Q4_FLUSH=$FL Q4_XS= Q4_WARP="4,1,4,1" Q4_SHAPES="$Q4SRC_SHAPES" timeout ${Q4_TIMEOUT:-90} \
      $PY bench/experiments/gemv_q4_configs.py > "$OUT/q4src_warp_$FL.txt" 2>&1
    grep -hE "GB/s|torch|rror" "$OUT"/q4src_*_$FL.txt | sed "s/^/$FL /"
    pack
  done
  Q4_XS="${Q4SRC_NCU:-8,16,2}" Q4_ONLY=0 Q4_SHAPES=16384,16384 timeout ${NCU_TIMEOUT:-120} ncu --kernel-name regex:gemv_q \
    --launch-skip 2 --launch-count 1 --section SourceCounters --section WarpStateStats --section InstructionStats \
    --section SpeedOfLight -f -o "$OUT/q4src" $PY bench/experiments/gemv_q4_configs.py > "$OUT/q4src_ncu.log" 2>&1
  ncu -i "$OUT/q4src.ncu-rep" --page source --csv --print-source sass > "$OUT/q4src.csv" 2>&1
  ncu -i "$OUT/q4src.ncu-rep" --page details > "$OUT/q4src_details.txt" 2>&1
  grep -E "Stall|Duration|DRAM Throughput|Executed Ipc|Issue Slots|No Eligible" "$OUT/q4src_details.txt" | head -n 24
  wc -l "$OUT/q4src.csv"
  pack
fi
if [ "$PART" = vkab ]; then
  # issue 16: the Vulkan rows of vk_timing_lead.py (rope, softmax and layer_norm 4096^2, exp 2^24 by default: VK_ROWS)
  # from the base tree at VK_BASE (`git archive BASE src | tar -x -C .snap/old`) and from this tree, base first, twice,
  # each tree compiling into its own cache -> vkab_{base,new}_{1,2}.json; then CUDA's from this tree -> vkab_cuda.json
  for ROUND in 1 2; do
    for TREE in base new; do
      S=${VK_BASE:-.snap/old}/src; [ $TREE = new ] && S=src
      VK_PARTS=vulkan VK_LEAD_FLAGS="1 1" VK_ROWS="${VK_ROWS:-rope,softmax,layer_norm,2^24}" \
        PYTHONPATH=$PWD/$S:${PYTHONPATH#*:} IRON_CACHE_DIR=/tmp/iron-cache-vk$TREE timeout ${VK_TIMEOUT:-60} \
        $PY bench/experiments/vk_timing_lead.py "$OUT/vkab_${TREE}_$ROUND.json" 2>&1 | sed "s/^/$ROUND $TREE /" | tail -n 6
      pack
    done
  done
  VK_PARTS=cuda VK_ROWS="${VK_ROWS:-rope,softmax,layer_norm,2^24}" timeout ${VK_TIMEOUT:-60} \
    $PY bench/experiments/vk_timing_lead.py "$OUT/vkab_cuda.json" 2>&1 | sed "s/^/cuda /" | tail -n 6
  pack
fi
