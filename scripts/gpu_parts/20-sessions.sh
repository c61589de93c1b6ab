# Parts of scripts/gpu_check.sh, sourced by it for each PART in the order of the file names (their usage is
# in its header): each session's tests of its changes (session7 ... session13, pdl).
if [ "$PART" = session7 ]; then
  # the tests of the 2026-12-03 session's changes on CUDA and hip-on-cuda (batched decode, model bench rows,
  # rope_append, the gated GEMV, misaligned views through aligned copies, the fast launchers' alignment check, the
  # f32 GEMM's new configurations), then the f32 GEMM and GEMV rows beside torch
  IRON_TEST_BACKENDS=cuda,hip-on-cuda timeout ${S7_TIMEOUT:-300} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/models/test_batch_decode.py tests/models/test_bench_rows.py tests/std/test_rope_append.py \
    tests/std/test_gemv_glu.py tests/hostile/test_misaligned_views.py tests/runtime_cuda tests/std/test_gemm_f32.py \
    tests/models/test_decode_graph.py --maxfail=30 2>&1 | tee "$OUT/pytest_session7.txt" | tail -n 30
  pack
  IRON_PROGRESS=lines timeout 200 $PY -m iron.cli.main bench --backend cuda -v --dtype f32 --filter "std/gemm/gemm_f32*" \
    --json "$OUT/gemm_f32.json" 2>&1 | tee "$OUT/gemm_f32.txt" | tail -n 12
  pack
fi
if [ "$PART" = pdl ]; then
  # programmatic dependent launch (sm_90, opt-in): the emitted instructions, SASS and launch attribute (CPU side), 200
  # dependent launches through each launch path and captured in a graph (GPU side), the decode step with it on; then
  # the 1B-shaped model on cuda with it on (decode tokens/s, a step's kernel time beside its wall time)
  IRON_TEST_BACKENDS=cuda timeout ${PDL_TEST_TIMEOUT:-200} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/runtime_cuda/test_pdl.py tests/runtime_cuda/test_pdl_gpu.py --maxfail=30 2>&1 \
    | tee "$OUT/pytest_pdl.txt" | tail -n 20
  IRON_CUDA_PDL=1 IRON_TEST_BACKENDS=cuda timeout ${PDL_TEST_TIMEOUT:-200} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/models/test_decode_graph.py --maxfail=30 2>&1 | tee "$OUT/pytest_pdl_decode.txt" | tail -n 20
  pack
  IRON_CUDA_PDL=1 timeout ${PDL_MODEL_TIMEOUT:-200} $PY scripts/gpu_model.py "$OUT/model_pdl.json" --backends cuda \
    2>&1 | grep -v "Writing model" | tee "$OUT/model_pdl.txt" | tail -n 30
  pack
fi
if [ "$PART" = session8 ]; then
  IRON_TEST_BACKENDS=cuda timeout ${S8_TIMEOUT:-150} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/runtime_cuda/test_tma_graph.py tests/runtime_cuda/test_gpu_time_streams.py tests/models/test_bench_rows.py \
    tests/std/test_gemv_warp.py \
    tests/std/test_gemv_glu.py --maxfail=30 2>&1 | tee "$OUT/pytest_session8.txt" | tail -n 20
  pack
  timeout ${PC_TIMEOUT:-170} $PY bench/experiments/prefill_check.py ${PC_LENGTHS:-32 512 2048} 2>&1 \
    | tee "$OUT/prefill_check.txt" | tail -n 12
  pack
  timeout 100 $PY bench/experiments/gemv_decode_sweep.py "$OUT/gemv_sweep.json" 2>&1 | tee "$OUT/gemv_sweep.txt" \
    | tail -n 40
  pack
  IRON_BENCH_COMPILE=0 IRON_PROGRESS=lines timeout ${S8_MB_TIMEOUT:-150} $PY -m iron.cli.main bench --backend cuda -v \
    --filter model/llama/decode --json "$OUT/model_decode.json" 2>&1 | tee "$OUT/model_decode.txt" | tail -n 12
  pack
fi
if [ "$PART" = session9 ]; then
  timeout ${MODEL_TIMEOUT:-270} $PY scripts/gpu_model.py "$OUT/model_1b.json" --backends cuda \
    2>&1 | grep -v "Writing model" | tee "$OUT/model_1b.txt" | tail -n 14
  pack
  IRON_CUDA_PDL=1 timeout ${MODEL_TIMEOUT:-270} $PY scripts/gpu_model.py "$OUT/model_pdl.json" --backends cuda \
    2>&1 | grep -v "Writing model" | tee "$OUT/model_pdl.txt" | tail -n 14
  pack
fi
if [ "$PART" = session9b ]; then
  IRON_TEST_BACKENDS=cuda timeout ${S9_TIMEOUT:-170} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/models/test_bench_rows.py::test_transformers_reference_keeps_rope_in_float32 tests/std/test_gemv_warp.py \
    tests/models/test_decode_graph.py \
    tests/runtime_cuda/test_tma_graph.py tests/runtime_cuda/test_gpu_time_streams.py --maxfail=30 2>&1 \
    | tee "$OUT/pytest_session9.txt" | tail -n 20
  pack
  IRON_CUDA_PDL=1 timeout ${MODEL_TIMEOUT:-150} $PY scripts/gpu_model.py "$OUT/model_pdl.json" --backends cuda \
    2>&1 | grep -v "Writing model" | tail -n 3
  pack
  timeout ${MODEL_TIMEOUT:-150} $PY scripts/gpu_model.py "$OUT/model_1b.json" --backends cuda \
    2>&1 | grep -v "Writing model" | tail -n 3
  pack
  PC_KNOBS=0 timeout ${PC_TIMEOUT:-80} $PY bench/experiments/prefill_check.py 512 2048 2>&1 \
    | tee "$OUT/prefill_check.txt" | tail -n 4
  pack
  timeout ${FZ_TIMEOUT:-110} $PY -m tests.fuzz.runner ${FZ_N:-2000} --jobs 12 --seed ${FZ_SEED:-708000000} \
    --max-seconds $(( ${FZ_TIMEOUT:-110} - 15 )) --backends cuda,vulkan --out "$OUT/fuzz" 2>&1 \
    | tee "$OUT/fuzz_gpu.txt" | tail -n 12
  pack
fi
if [ "$PART" = session9c ]; then
  IRON_TEST_BACKENDS=cuda timeout ${S9_TIMEOUT:-210} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/models/test_bench_rows.py::test_transformers_reference_keeps_rope_in_float32 \
    tests/models/test_decode_graph.py tests/runtime_cuda tests/frontend/test_kernels.py tests/std --maxfail=30 2>&1 \
    | tee "$OUT/pytest_session9c.txt" | tail -n 25
  pack
  timeout ${FZ_TIMEOUT:-60} $PY -m tests.fuzz.runner ${FZ_N:-2000} --jobs 12 --seed ${FZ_SEED:-708000000} \
    --max-seconds $(( ${FZ_TIMEOUT:-60} - 12 )) --backends cuda,vulkan --out "$OUT/fuzz" 2>&1 \
    | tee "$OUT/fuzz_gpu.txt" | grep -v "^  [0-9]*/" | tail -n 14
  pack
  timeout ${MODEL_TIMEOUT:-85} $PY scripts/gpu_model.py "$OUT/model_1b.json" --backends cuda \
    2>&1 | grep -v "Writing model" | cut -c1-300 | tail -n 2
  pack
fi
if [ "$PART" = session10 ]; then
  IRON_TEST_BACKENDS=cuda,vulkan timeout ${S10_TIMEOUT:-150} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/runtime_vulkan/test_gpu_tuning.py tests/arrays/test_graph.py tests/runtime_cuda/test_targets.py \
    tests/runtime_cuda/test_pdl.py tests/std/test_attention_wg.py tests/std/test_gemv_warp.py --maxfail=30 2>&1 \
    | tee "$OUT/pytest_session10.txt" | tail -n 20
  pack
  ATTN_CFGS=${ATTN_CFGS:-"2,2,2,0 2,2,3,0"} timeout ${ATTN_TIMEOUT:-120} $PY bench/experiments/attn_wg_sweep.py \
    "$OUT/attn_wg_sweep.json" 2>&1 | tee "$OUT/attn_wg_sweep.txt" | tail -n 12
  pack
  timeout ${MODEL_TIMEOUT:-290} $PY scripts/gpu_model.py "$OUT/model_1b.json" --backends cuda,vulkan \
    2>&1 | grep -v "Writing model" | cut -c1-400 | tee "$OUT/model_1b.txt" | tail -n 30
  pack
fi
if [ "$PART" = session11 ]; then
  # the tests the 2026-12-03 (eleventh) session mended after session10's run: tuning on a Vulkan GPU, the row
  # kernels' split path under CUDA tuning, table_for without Vulkan, the gemm_f32 register bound per NVRTC
  IRON_TEST_BACKENDS=cuda,vulkan timeout ${S11_TIMEOUT:-120} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/runtime_vulkan/test_gpu_tuning.py tests/std/test_scan.py tests/std/test_softmax_ext.py \
    "tests/std/test_gemv_warp.py::test_launch_gemv_glu_out" "tests/std/test_gemv_warp.py::test_tuned_on_cuda_only" \
    tests/std/test_gemm_f32.py --maxfail=30 2>&1 | tee "$OUT/pytest_session11.txt" | tail -n 20
  pack
fi
if [ "$PART" = session12 ]; then
  # issue 19 item 4: the tiny checkpoints against transformers' recorded logits and tokens on CUDA, hip-on-cuda and
  # NVIDIA's Vulkan; issue 17: H200 fuzz seed 710000802 replayed with the runner's new allowance, then a sample
  IRON_TEST_BACKENDS=cuda,hip-on-cuda,vulkan timeout ${S12_TIMEOUT:-200} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/models/test_model_runner.py tests/models/test_refs_data.py --maxfail=30 2>&1 \
    | tee "$OUT/pytest_models_3backends.txt" | tail -n 20
  pack
  # the eleventh session's changed and mended tests on CUDA and NVIDIA's Vulkan (tuned RoPE in place, layer_norm's
  # LATE, the row kernels' split path under tuning)
  IRON_TEST_BACKENDS=cuda,vulkan timeout ${S12B_TIMEOUT:-150} $PY -m pytest -p no:cacheprovider -q -rfEs \
    tests/std/test_rope.py tests/std/test_layer_norm.py tests/std/test_reductions.py tests/std/test_scan.py \
    tests/std/test_softmax_ext.py tests/std/test_gemv_warp.py --maxfail=30 2>&1 | tee "$OUT/pytest_session11b.txt" \
    | tail -n 20
  pack
  timeout 60 $PY -m tests.fuzz.runner 1 --kind source --jobs 1 --seed 710000802 --backends cuda,vulkan -v \
    --out "$OUT/fuzz_replay" 2>&1 | tee "$OUT/fuzz_replay.txt" | tail -n 6
  pack
fi
if [ "$PART" = session13 ]; then
  # the twelfth session's new kernel paths (coalesced decode attention, radix top-k, q4 GEMV) on CUDA and NVIDIA's
  # Vulkan against their float64 oracles, then the same kernels timed beside torch (lib rows, bf16)
  IRON_TEST_BACKENDS=cuda,vulkan timeout ${S13_TIMEOUT:-150} $PY -m pytest -p no:cacheprovider -q -rfEs \
    $(ls tests/std/test_attention_decode*.py tests/std/test_topk*.py tests/std/test_quant_gemv*.py 2>/dev/null) \
    tests/std/test_sampling.py tests/std/test_quant.py --maxfail=30 2>&1 | tee "$OUT/pytest_session13.txt" | tail -n 20
  pack
fi
