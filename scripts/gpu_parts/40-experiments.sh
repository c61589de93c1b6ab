# Parts of scripts/gpu_check.sh, sourced by it for each PART in the order of the file names (their usage is
# in its header): profiles, sweeps and Vulkan diagnostics (attnvar ... vulkan).
if [ "$PART" = attnvar ]; then
  timeout ${ATTNVAR_TIMEOUT:-300} $PY bench/experiments/attn_variants.py "$OUT/attn_variants.json" 2>&1 \
    | tee "$OUT/attn_variants.txt" | tail -n 14
  pack
fi
if [ "$PART" = fuzz ]; then
  timeout ${FZ_TIMEOUT:-90} $PY -m tests.fuzz.runner ${FZ_N:-5000} --jobs 12 --seed ${FZ_SEED:-710000000} \
    --max-seconds $(( ${FZ_TIMEOUT:-90} - 15 )) --backends ${FZ_BACKENDS:-cuda,vulkan} --out "$OUT/fuzz" 2>&1 \
    | tee "$OUT/fuzz_gpu.txt" | grep -v "^  [0-9]*/" | tail -n 14
  pack
fi
if [ "$PART" = modelbench ]; then
  # issue 19: iron bench's model rows (prefill 512/2048, decode batch 1/8) beside transformers eager and compiled
  for B in ${MB_BACKENDS:-cuda}; do
    IRON_PROGRESS=lines timeout ${MB_TIMEOUT:-500} $PY -m iron.cli.main bench --backend $B -v --filter model/ \
      --json "$OUT/model_bench_$B.json" 2>&1 | tee "$OUT/model_bench_$B.txt" | tail -n 20
    pack
  done
fi
if [ "$PART" = ncu ]; then
  # the attention prefill kernel of a Llama-1B layer under Nsight Compute: throughput, stall reasons, occupancy
  timeout 60 $PY bench/experiments/attn_ncu.py 2>&1 | tee "$OUT/attn_time.txt"
  timeout ${NCU_TIMEOUT:-150} ncu --kernel-name ${NCU_KERNEL:-attn_prefill} --launch-skip 3 --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis --section SchedulerStats $PY bench/experiments/attn_ncu.py 2>&1 \
    | tee "$OUT/attn_ncu.txt" | tail -n 80
fi
if [ "$PART" = decodencu ]; then
  # issue 18: every decode split configuration timed beside SDPA (bench/experiments/decode_ncu.py), then the
  # configurations in DECODE_NCU (indices; default the first two) under Nsight Compute: throughput, stalls, occupancy
  timeout ${DECODE_TIMEOUT:-120} $PY bench/experiments/decode_ncu.py 2>&1 | tee "$OUT/decode_configs.txt" | tail -n 14
  for I in ${DECODE_NCU:-0 1}; do
    DECODE_ONLY=$I profile_ncu "decode_ncu_$I.txt" attn_decode_split 2 1 bench/experiments/decode_ncu.py
  done
  pack
fi
if [ "$PART" = attnwg ]; then
  # issue 18: attn_prefill_wg's configurations (ATTN_CFGS "NC,WG,STAGES ...") timed beside torch SDPA, checked first
  timeout ${ATTN_TIMEOUT:-240} $PY bench/experiments/attn_wg_sweep.py "$OUT/attn_wg_sweep.json" 2>&1 \
    | tee "$OUT/attn_wg_sweep.txt" | tail -n 40
  pack
fi
if [ "$PART" = wgsweep ]; then
  # issue 14: every gemm_wg configuration (and new ones) timed alone at the sizes of WG_SIZES, checked first
  IRON_WG_SWEEP=${WG_SIZES:-4096,8192} timeout ${WG_TIMEOUT:-200} $PY scripts/gpu_tile_bench.py "$OUT/wg_sweep.json" \
    2>&1 | tee "$OUT/wg_sweep.txt" | tail -n 20
fi
if [ "$PART" = vgemm ]; then
  # issue 14: the std GEMM through cooperative matrices on NVIDIA's Vulkan driver, beside CUDA (bf16)
  for B in ${VGEMM_BACKENDS:-vulkan cuda}; do
    IRON_PROGRESS=lines timeout ${VGEMM_TIMEOUT:-150} $PY -m iron.cli.main bench --backend $B -v --dtype ${VGEMM_DTYPE:-bf16} \
      --filter "${VGEMM_FILTER:-std/gemm/gemm}" --json "$OUT/gemm_$B${VGEMM_TAG:-}.json" 2>&1 | tee "$OUT/gemm_$B${VGEMM_TAG:-}.txt" | tail -n 12
    pack
  done
fi
if [ "$PART" = gemmncu ]; then
  # issue 14: Iron's std GEMM and the bench's Triton GEMM at GEMM_SHAPE under Nsight Compute, side by side
  timeout 90 $PY bench/experiments/gemm_ncu.py ${GEMM_SHAPE:-4096 4096 4096} 2>&1 | tee "$OUT/gemm_time.txt"
  timeout ${NCU_TIMEOUT:-180} ncu --profile-from-start off --section SpeedOfLight --section WarpStateStats \
    --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section SchedulerStats --section InstructionStats $PY bench/experiments/gemm_ncu.py ${GEMM_SHAPE:-4096 4096 4096} \
    2>&1 | tee "$OUT/gemm_ncu.txt" | tail -n 40
  pack
fi
if [ "$PART" = sanitize ]; then
  # issue 17: compute-sanitizer memcheck and racecheck over the std kernels' tests and the conformance suite on CUDA,
  # the tests split round-robin into SAN_JOBS shards run side by side (the tools slow each test ~100x); logs committed
  IRON_TEST_BACKENDS=cuda $PY -m pytest -p no:cacheprovider -o addopts="" --collect-only -q \
    ${SAN_TESTS:-tests/std/test_std_kernels.py tests/frontend/test_kernels.py} -k "${SAN_FILTER:-cuda}" 2>/dev/null \
    | grep "::" > /tmp/san_ids.txt
  rm -f /tmp/san_shard_*
  split -n r/${SAN_JOBS:-12} /tmp/san_ids.txt /tmp/san_shard_
  echo "sanitize: $(wc -l < /tmp/san_ids.txt) tests in ${SAN_JOBS:-12} shards" | tee "$OUT/sanitize_summary.txt"
  if [ -n "${SAN_WARM:-}" ]; then
    # compile every kernel (and fill the tuning tables) outside the tool first: under racecheck a cold compile and
    # autotune's candidates cost minutes per test (2026-12-03 twelfth session: 6 tests a shard in 250 s)
    for f in /tmp/san_shard_*; do
      ( IRON_TEST_BACKENDS=cuda IRON_AUTOTUNE=${SAN_AUTOTUNE:-each} timeout ${SAN_WARM_TIMEOUT:-120} $PY -m pytest -p no:cacheprovider -q -o addopts="" \
          -p no:randomly $(cat $f) > "/tmp/warm_$(basename $f).txt" 2>&1 ) &
    done
    wait
    echo "warm: $(tail -q -n 1 /tmp/warm_san_shard_* | tr '\n' ';')" | tee -a "$OUT/sanitize_summary.txt"
  fi
  for TOOL in ${SAN_TOOLS:-memcheck racecheck}; do
    for f in /tmp/san_shard_*; do
      log="$OUT/sanitize_${TOOL}_$(basename $f | sed 's/san_shard_//').txt"
      # IRON_AUTOTUNE=each: every tuning candidate launched once, untimed (timing repeats each 6 times under the tool)
      ( IRON_TEST_BACKENDS=cuda IRON_AUTOTUNE=${SAN_AUTOTUNE:-each} timeout ${SAN_TIMEOUT:-150} compute-sanitizer --tool $TOOL --error-exitcode 86 \
          --print-limit 20 $PY -m pytest -p no:cacheprovider -q -o addopts="" -p no:randomly $(cat $f) > "$log" 2>&1
        echo "exit $?" >> "$log" ) &
    done
    wait
    { echo "== $TOOL: $(grep -h "ERROR SUMMARY" "$OUT"/sanitize_${TOOL}_*.txt | sort | uniq -c | tr '\n' ';')"
      echo "   exits: $(grep -ho 'exit [0-9]*$' "$OUT"/sanitize_${TOOL}_*.txt | sort | uniq -c | tr '\n' ';')"
      echo "   pytest: $(grep -hE '[0-9]+ (passed|failed)' "$OUT"/sanitize_${TOOL}_*.txt | tr '\n' ';')"
    } | tee -a "$OUT/sanitize_summary.txt"
    pack
  done
fi
if [ "$PART" = session3 ]; then
  # 2026-12-02 (second session): the changed pieces on CUDA, then on NVIDIA's Vulkan when carried
  IRON_TEST_BACKENDS=cuda,vulkan timeout ${S3_TIMEOUT:-120} $PY -m pytest -p no:cacheprovider -q -rs \
    tests/std/test_gemm_staged.py tests/arrays/test_device_arrays.py tests/harness/test_workers.py ${S3_TESTS:-} 2>&1 \
    | tee "$OUT/pytest_session3.txt" | tail -n 12
  pack
fi
if [ "$PART" = session4 ]; then
  IRON_TEST_BACKENDS=cuda,vulkan timeout ${S4_TIMEOUT:-300} $PY -m pytest -p no:cacheprovider -q -rfE --maxfail=20 \
    tests/frontend/test_optional_buffer.py tests/runtime_vulkan/test_subgroup_pin.py tests/models/test_quantized.py \
    tests/models/test_decode_graph.py tests/frontend/test_gemm_persistent.py tests/frontend/test_warpgroup.py \
    ${S4_TESTS:-} 2>&1 | tee "$OUT/pytest_session4.txt" | tail -n 20
  pack
fi
if [ "$PART" = pytest ]; then
  IRON_TEST_BACKENDS=${PT_BACKENDS:-cuda,vulkan} timeout ${PT_TIMEOUT:-200} $PY -m pytest -p no:cacheprovider -q -rfE \
    --maxfail=${PT_MAXFAIL:-20} ${PT_K:+-k "$PT_K"} ${PT_TESTS:-tests/std} 2>&1 | tee "$OUT/${PT_NAME:-pytest_any}.txt" | tail -n 30
  pack
fi
if [ "$PART" = valone ]; then
  # issue 14: gemm_rs's configurations one by one on NVIDIA's Vulkan (4096^3 vs 8192^3, one or three input copies)
  if [ -n "${VALONE_CASE:-}" ]; then  # the bench's own path instead (measure.bench_case), every sample printed
    timeout ${VALONE_TIMEOUT:-240} $PY bench/experiments/vgemm_bench_case.py $VALONE_CASE 2>&1 \
      | tee "$OUT/vgemm_bench_case.txt" | tail -n 40
  else
    timeout ${VALONE_TIMEOUT:-240} $PY bench/experiments/vgemm_alone.py ${VALONE_DTYPE:-bf16} "$OUT/vgemm_alone.json" 2>&1 \
      | tee "$OUT/vgemm_alone.txt" | tail -n 40
  fi
  pack
fi
if [ "$PART" = wgvar ]; then
  timeout ${WGVAR_TIMEOUT:-420} $PY bench/experiments/wg_variants.py "$OUT/wg_variants.json" 2>&1 \
    | tee "$OUT/wg_variants.txt" | tail -n 30
  pack
fi
if [ "$PART" = vprofile ]; then
  # issue 16: the host time of a Vulkan launch on device arrays, and where it goes (cProfile), beside CUDA's
  for B in vulkan cuda; do
    timeout 60 $PY bench/experiments/vk_launch_profile.py $B 2>&1 | tee "$OUT/launch_profile_$B.txt" | head -n 30
  done
  pack
fi
if [ "$PART" = vdiag ]; then
  timeout ${VDIAG_TIMEOUT:-120} $PY bench/experiments/vk_barrier_cost.py "$OUT/vk_barrier_cost.json" 2>&1 \
    | tee "$OUT/vk_barrier_cost.txt" | tail -n 8
  for B in vulkan cuda; do
    timeout ${VDIAG_TIMEOUT:-120} $PY bench/experiments/vk_silu_variants.py $B "$OUT/silu_variants_$B.json" 2>&1 \
      | tee "$OUT/silu_variants_$B.txt" | tail -n 6
  done
  IRON_CACHE=0 timeout ${VDIAG_TIMEOUT:-120} $PY bench/experiments/vk_fdiv_contract.py "$OUT/vk_fdiv_contract.json" 2>&1 \
    | tee "$OUT/vk_fdiv_contract.txt" | tail -n 4
  pack
fi
if [ "$PART" = vsilu ]; then  # silu's cost on Vulkan: the float-controls mode, GLSL Exp2 against Iron's precise exp2
  for V in ${VSILU_RUNS:-vulkan:1:0 vulkan:0:0 vulkan:1:1 vulkan:0:1 cuda:1:0}; do  # backend:IEEE:NATIVE_EXP
    B=${V%%:*}; R=${V#*:}; I=${R%:*}; X=${R#*:}
    VK_SILU_IEEE=$I VK_SILU_NATIVE_EXP=$X IRON_CACHE=0 timeout ${VDIAG_TIMEOUT:-120} $PY bench/experiments/vk_silu_variants.py $B \
      "$OUT/silu_variants_${B}_ieee${I}_native$X.json" 2>&1 | tee "$OUT/silu_variants_${B}_ieee${I}_native$X.txt" | tail -n 12
  done
  pack
fi
if [ "$PART" = q4bounds ]; then  # gemv_q_warp's configurations unbounded, then under each launch bound in Q4_BOUNDS_LIST
  for LB in none ${Q4_BOUNDS_LIST:-128,6 128,8}; do
    [ "$LB" = none ] && LBV= || LBV=$LB
    Q4_BOUNDS=$LBV Q4_PATH=warp Q4_SHAPES=${Q4_SHAPES:-16384,16384;4096,4096} timeout ${Q4_TIMEOUT:-100} \
      $PY bench/experiments/gemv_q4_configs.py 2>&1 | tee "$OUT/gemv_q4_bounds_${LB/,/_}.txt" | tail -n 16
    pack
  done
fi
if [ "$PART" = vfdiv ]; then  # vdiag's last experiment alone
  IRON_CACHE=0 timeout ${VDIAG_TIMEOUT:-120} $PY bench/experiments/vk_fdiv_contract.py "$OUT/vk_fdiv_contract.json" 2>&1 \
    | tee "$OUT/vk_fdiv_contract.txt" | tail -n 4
  pack
fi
if [ "$PART" = cm2 ]; then  # issue 14: GEMM through VK_NV_cooperative_matrix2 beside Iron's CUDA GEMM and torch
  IRON_VULKAN_COOPMAT2=1 CM2_PREBUILT=1 timeout ${CM2_TIMEOUT:-400} $PY bench/experiments/vk_coopmat2_gemm.py \
    "$OUT/coopmat2_gemm.json" ${CM2_DTYPES:-bf16 f16} 2>&1 | tee "$OUT/coopmat2_gemm.txt" | tail -n 40
  pack
fi
if [ "$PART" = gemmf32 ]; then
  IRON_PROGRESS=lines timeout ${GEMMF32_TIMEOUT:-240} $PY -m iron.cli.main bench --backend cuda -v --dtype f32 \
    --filter std/gemm/gemm_f32 --json "$OUT/gemm_f32.json" 2>&1 | tee "$OUT/gemm_f32.txt" | grep -E "│|autotune" | tail -n 30
  pack
fi
if [ "$PART" = varrays ]; then
  # issue 16 on NVIDIA's Vulkan driver: device arrays, host time per launch (beside CUDA and torch), and iron bench
  # on a GPU (device shapes, a copy ceiling through Vulkan, torch on the same GPU as the reference) beside CUDA's
  timeout 60 $PY bench/experiments/array_launch.py "$OUT/array_launch.json" cuda vulkan 2>&1 | tail -n 4
  IRON_TEST_BACKENDS=${ARRAY_BACKENDS:-vulkan} timeout ${ARRAY_TIMEOUT:-80} $PY -m pytest -p no:cacheprovider tests/arrays -rs 2>&1 \
    | tee "$OUT/pytest_arrays_vulkan.txt" | tail -n 8
  pack
  for B in vulkan cuda; do
    IRON_PROGRESS=lines timeout ${VBENCH_TIMEOUT:-60} $PY -m iron.cli.main bench --backend $B -v --dtype bf16 \
      --filter "${VBENCH_FILTER:-std/softmax/row}" --json "$OUT/bench_${B}_arrays.json" 2>&1 \
      | tee "$OUT/bench_${B}_arrays.txt" | tail -n 14
    pack
  done
fi
if [ "$PART" = vulkan ]; then
  IRON_TEST_BACKENDS=vulkan timeout 300 $PY -m pytest -p no:cacheprovider tests/frontend/test_kernels.py \
    tests/frontend/test_tile.py tests/frontend/test_matrix.py tests/frontend/test_math_ops.py \
    --maxfail=30 -rs 2>&1 | tee "$OUT/pytest_vulkan.txt" | tail -n 20
  # cooperative matrices (VK_KHR_cooperative_matrix) and 16-byte word views on NVIDIA's driver; the GEMMs through them
  IRON_TEST_BACKENDS=vulkan timeout 300 $PY -m pytest -p no:cacheprovider tests/runtime_vulkan/test_coopmat_gpu.py \
    tests/runtime_vulkan/test_vector_words.py tests/frontend/test_warpgroup.py tests/std -k "vulkan or coopmat" -rs \
    2>&1 | tee "$OUT/pytest_vulkan_coopmat.txt" | tail -n 20
  IRON_PROGRESS=lines timeout 200 $PY -m iron.cli.main bench --backend vulkan -v --dtype bf16 --filter std/gemm/gemm \
    --json "$OUT/vulkan_gemm.json" 2>&1 | tee "$OUT/vulkan_gemm.txt" | tail -n 12
  # the differential fuzzer on NVIDIA's driver (the interpreter runs at its subgroup size, 32)
  timeout 120 $PY -m pytest -p no:cacheprovider tests/fuzz -rs 2>&1 | tee "$OUT/pytest_fuzz_vulkan.txt" | tail -n 10
  timeout 120 $PY bench/experiments/vulkan_vs_cuda.py "$OUT/vulkan_vs_cuda.json" 2>&1 | tail -n 20
fi
if [ "$PART" = largest ]; then
  IRON_PROGRESS=lines timeout ${LG_TIMEOUT:-500} $PY bench/experiments/bench_largest.py "$OUT/largest.json" \
    ${LG_BACKEND:-cuda} ${LG_DTYPES:-bf16} ${LG_PATTERNS:-std/rope std/norm} 2>&1 | tee "$OUT/largest.txt" \
    | grep -E "iron bench on|Configuration"
  pack
fi
