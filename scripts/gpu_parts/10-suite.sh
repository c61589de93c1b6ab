# Parts of scripts/gpu_check.sh, sourced by it for each PART in the order of the file names (their usage is
# in its header): the conformance suite, benchmarks and tile work on CUDA (cuda, tests, speed, launch, tile, gemm, rows, lib,
# bench, arrays, stdnew, changed, vchanged, model).
if [ "$PART" = cuda ] || [ "$PART" = tests ]; then
  IRON_TEST_BACKENDS=cuda timeout 240 $PY -m pytest -p no:cacheprovider tests/frontend/test_kernels.py \
    tests/frontend/test_tile.py tests/frontend/test_matrix.py tests/frontend/test_math_ops.py \
    tests/frontend/test_warpgroup.py tests/codegen \
    tests/std tests/codegen_hip/test_hip_on_nvidia_gpu.py --maxfail=30 -rs 2>&1 | tee "$OUT/pytest_cuda.txt" | tail -n 40
  IRON_TEST_BACKENDS=hip-on-cuda timeout 200 $PY -m pytest -p no:cacheprovider tests/frontend/test_kernels.py \
    --maxfail=30 -rs 2>&1 | tee "$OUT/pytest_hip_on_cuda.txt" | tail -n 20
fi
if [ "$PART" = cuda ] || [ "$PART" = speed ]; then
  timeout 150 $PY scripts/gpu_bench.py "$OUT/gpu_bench.json" 2>&1 | tee "$OUT/bench.txt"
  if command -v nvcc >/dev/null; then
    nvcc -O2 -arch=sm_90 bench/experiments/launch_floor.cu -o /tmp/launch_floor -lcuda && /tmp/launch_floor \
      2>&1 | tee "$OUT/launch_floor.txt"
  fi
  timeout 60 $PY bench/experiments/launch_breakdown.py "$OUT/launch_breakdown.json" 2>&1 | tail -n 20
fi
if [ "$PART" = launch ]; then
  nvcc -O2 -arch=sm_90 bench/experiments/launch_floor.cu -o /tmp/launch_floor -lcuda && /tmp/launch_floor \
    2>&1 | tee "$OUT/launch_floor.txt"
  timeout 60 $PY bench/experiments/launch_breakdown.py "$OUT/launch_breakdown.json" 2>&1 | tail -n 40
  timeout 120 $PY scripts/gpu_bench.py --launch-only "$OUT/gpu_launch.json" 2>&1 | tail -n 60
fi
if [ "$PART" = tile ]; then
  TILE_TESTS="tests/frontend/test_tile.py tests/frontend/test_matrix.py tests/frontend/test_math_ops.py \
    tests/frontend/test_warpgroup.py"
  IRON_TEST_BACKENDS=cuda,hip-on-cuda timeout 180 $PY -m pytest -p no:cacheprovider $TILE_TESTS tests/std \
    --maxfail=30 -rs 2>&1 | tee "$OUT/pytest_tile_cuda.txt" | tail -n 25
  timeout 330 $PY scripts/gpu_tile_bench.py "$OUT/gpu_tile.json" 2>&1 | tee "$OUT/gpu_tile.txt" | tail -n 20
fi
if [ "$PART" = gemm ]; then
  timeout 200 $PY bench/experiments/wgmma_proto.py "$OUT/wgmma_proto.json" 2>&1 | tee "$OUT/wgmma_proto.txt" | tail -n 30
  IRON_TILE_SWEEP=1 timeout 300 $PY scripts/gpu_tile_bench.py "$OUT/gemm_sweep.json" 2>&1 | tee "$OUT/gemm_sweep.txt" \
    | tail -n 30
fi
if [ "$PART" = rows ]; then
  # issue 14: the row kernels (register arrays, 16-byte accesses) beside torch and Triton, bf16
  for K in std/softmax std/norm std/gemv; do
    IRON_PROGRESS=lines timeout 110 $PY -m iron.cli.main bench --backend cuda -v --dtype bf16 --filter "$K" \
      --json "$OUT/rows_$(basename $K).json" 2>&1 | tee "$OUT/rows_$(basename $K).txt" | tail -n 14
  done
fi
if [ "$PART" = lib ]; then
  # issue 18: the new std kernels beside torch, bf16 (device shapes)
  for K in ${LIB_KERNELS:-std/elementwise/silu std/elementwise/add_row std/elementwise/swiglu std/cast/to_bf16 \
      std/norm/add_rms_norm std/norm/layer_norm std/rope/rotate_half std/rope/interleaved std/gather/embedding}; do
    IRON_PROGRESS=lines timeout ${LIB_TIMEOUT:-70} $PY -m iron.cli.main bench --backend ${LIB_BACKEND:-cuda} -v --dtype bf16 --filter "$K" \
      --json "$OUT/lib_$(echo $K | tr / _)${LIB_TAG:-}.json" 2>&1 | tee "$OUT/lib_$(echo $K | tr / _)${LIB_TAG:-}.txt" \
      | grep "│" | tail -n 4
  done
fi
if [ "$PART" = bench ]; then
  nvidia-smi -L | tee -a "$OUT/env.txt"
  IRON_PROGRESS=lines timeout ${BENCH_TIMEOUT:-540} $PY -m iron.cli.main bench --backend cuda -v --json "$OUT/iron_bench_cuda.json" \
    2>&1 | tee "$OUT/iron_bench_cuda.txt" | tail -n 70
fi
if [ "$PART" = arrays ]; then
  # issue 16 on CUDA: device arrays, DLPack with torch, torch custom ops (torch.compile, CUDA graphs), the
  # multi-device refusal; then the conformance suite on device arrays
  IRON_TEST_BACKENDS=cuda timeout 90 $PY -m pytest -p no:cacheprovider tests/arrays -rs 2>&1 \
    | tee "$OUT/pytest_arrays_cuda.txt" | tail -n 15
  pack
  IRON_TEST_ARRAYS=device IRON_TEST_BACKENDS=cuda timeout 100 $PY -m pytest -p no:cacheprovider \
    tests/frontend/test_kernels.py --maxfail=30 -rs 2>&1 | tee "$OUT/pytest_conformance_arrays_cuda.txt" | tail -n 8
fi
if [ "$PART" = stdnew ]; then
  # issue 18's kernels of this wave (attention, quantized GEMV/GEMM, reductions, top-k/sampling, scan, softmax
  # variants, vectorized elementwise) on CUDA against their float64 oracles
  IRON_TEST_BACKENDS=cuda timeout ${STDNEW_TIMEOUT:-110} $PY -m pytest -p no:cacheprovider tests/std --maxfail=30 -rs \
    -k "attention or quant or reduc or topk or sampl or scan or softmax_ext or log_softmax or elementwise or cast" \
    2>&1 | tee "$OUT/pytest_std_new_cuda.txt" | tail -n 15
fi
if [ "$PART" = changed ]; then
  # this session's changed kernels and runtime pieces on CUDA (and the recordings on NVIDIA's Vulkan when carried)
  IRON_TEST_BACKENDS=cuda timeout ${CHANGED_TIMEOUT:-170} $PY -m pytest -p no:cacheprovider -q -rs \
    tests/std/test_attention.py tests/std/test_attention_decode_speed_paths.py tests/std/test_rope.py \
    tests/std/test_gather.py tests/arrays/test_graph.py tests/arrays/test_device_arrays.py \
    tests/models/test_decode_graph.py tests/models/test_model_runner.py 2>&1 | tee "$OUT/pytest_changed_cuda.txt" \
    | tail -n 15
  pack
  timeout 40 $PY bench/experiments/attn_ncu.py 2>&1 | tee "$OUT/attn_time.txt"
fi
if [ "$PART" = vchanged ]; then
  IRON_TEST_BACKENDS=vulkan timeout ${VCHANGED_TIMEOUT:-90} $PY -m pytest -p no:cacheprovider -q -rs \
    tests/arrays/test_graph.py tests/models/test_decode_graph.py 2>&1 | tee "$OUT/pytest_changed_vulkan.txt" | tail -n 8
fi
if [ "$PART" = model ]; then
  # issue 19: the Llama-3.2-1B-shaped model (random bf16 weights made here by transformers) on Iron beside
  # transformers: logits, greedy tokens, decode tokens/s, prefill ms, a decode step's kernels (CUPTI)
  timeout ${MODEL_TIMEOUT:-420} $PY scripts/gpu_model.py "$OUT/model_1b.json" --backends ${MODEL_BACKENDS:-cuda,vulkan} \
    2>&1 | grep -v "Writing model" | tee "$OUT/model_1b.txt" | tail -n 30
fi
