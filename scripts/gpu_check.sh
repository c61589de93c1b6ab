#!/usr/bin/env bash
# GPU work for the H200, in parts that each fit one device call (600 s), from the repo root:
#   scripts/gpu_check.sh cuda    (default)
#     1. the conformance suite on backend=cuda (every kernel, every dtype, against the NumPy oracles), the emitter's
#        GPU tests (tests/codegen), the std kernels (tests/std) and the HIP source through the compatibility header
#        (tests/codegen_hip/test_hip_on_nvidia_gpu.py); then the whole conformance suite again on backend=hip-on-cuda
#        (Iron's HIP source, wavefront 32, behind the compatibility header, through NVRTC),
#     2. scripts/gpu_bench.py: exp 256M vs the copy ceiling and torch, launch overhead (compiled and Python
#        launchers, torch, Triton), graph replay; the C++ launch floor (bench/experiments/launch_floor.cu) beside it
#   scripts/gpu_check.sh tests   (1. only)
#   scripts/gpu_check.sh speed   (2. only)
#   scripts/gpu_check.sh launch  (the launch floor in C++, bench/experiments/launch_breakdown.py and the launch
#                                 figures of scripts/gpu_bench.py only)
#   scripts/gpu_check.sh bench
#     3. iron bench -v on CUDA (every std kernel beside torch; registers, occupancy, %BW, %FLOP) -> iron_bench_cuda.json,
#        one worker per GPU where there are several
#   scripts/gpu_check.sh tile
#     5. issue 14: the tile-level tests (register arrays, vector accesses, matrix fragments, warpgroup_mma (wgmma on
#        the H200), the new math) on CUDA and hip-on-cuda, then scripts/gpu_tile_bench.py: std GEMM (mma.sync and,
#        with IRON_WGMMA=1, gemm_wg) beside cuBLAS and Triton, SASS (HMMA, HGMMA) -> gpu_tile.json
#   scripts/gpu_check.sh gemm
#     7. issue 14: bench/experiments/wgmma_proto.py (hand-written wgmma GEMM: descriptors checked, timed beside
#        cuBLAS) -> wgmma_proto.json; the std GEMM's mma.sync configurations timed one by one
#        (IRON_TILE_SWEEP=1 scripts/gpu_tile_bench.py) -> gemm_sweep.json
#   scripts/gpu_check.sh rows
#     6. iron bench -v on CUDA, bf16, for softmax, rms_norm and gemv (Iron beside torch and Triton) -> rows_*.json
#   scripts/gpu_check.sh lib     issue 18: the new std kernels (elementwise, casts, SwiGLU, fused add + rms_norm,
#                                 layer_norm, RoPE, embedding) on CUDA beside torch, bf16 -> lib_*.json
#   scripts/gpu_check.sh arrays  issue 16 on CUDA: tests/arrays, the conformance suite on device arrays
#   scripts/gpu_check.sh stdnew  issue 18's new kernels' tests on CUDA
#   scripts/gpu_check.sh varrays issue 16 on NVIDIA's Vulkan (carry as for vulkan): tests/arrays, host time per launch
#                                 (bench/experiments/array_launch.py), iron bench on Vulkan beside CUDA
#   scripts/gpu_check.sh model   issue 19: scripts/gpu_model.py (the 1B-shaped model on cuda, and vulkan when .gl is
#                                 carried) beside transformers -> model_1b.json
#   scripts/gpu_check.sh changed the tests of the kernels and runtime pieces changed on 2026-12-02, on CUDA; the
#                                 attention prefill timed (bench/experiments/attn_ncu.py)
#   scripts/gpu_check.sh vchanged  the recordings (iron.graph, the decode step) on NVIDIA's Vulkan
#   scripts/gpu_check.sh session7 the tests of the 2026-12-03 session's changes on CUDA and hip-on-cuda; f32 GEMM rows
#   scripts/gpu_check.sh pdl     programmatic dependent launch (IRON_CUDA_PDL=1, opt-in): tests/runtime_cuda/test_pdl*.py
#                                 (200 dependent launches, the same in a graph), the decode-step tests with it on, then
#                                 scripts/gpu_model.py on cuda with it on -> model_pdl.json (the `model` part: without)
#   scripts/gpu_check.sh session8 the 2026-12-03 (eighth) session: its tests on CUDA (copy-engine descriptors made while
#                                 recording, model bench rows, gemv_warp), long-prompt prefill vs transformers f32
#                                 (bench/experiments/prefill_check.py), the decode GEMV sweep, the decode bench rows
#   scripts/gpu_check.sh session9 the 1B-shaped model on cuda without and then with programmatic dependent launch, on
#                                 one machine (model_1b.json, model_pdl.json): the PDL A/B of the decode rate
#   scripts/gpu_check.sh session9b (carry .gl/.whl) the ninth session's tests on CUDA (GLU-output GEMV, the decode
#                                 recording kept across generate calls, the reference's float32 rope), the model
#                                 with PDL then without (the A/B of session9 in the other order), the long-prompt
#                                 check vs transformers f32, a differential-fuzzer sample on CUDA and NVIDIA's Vulkan
#   scripts/gpu_check.sh session9c (carry .gl/.whl) with PDL on by default: this session's tests, the conformance suite
#                                 and the std kernels on CUDA; the differential fuzzer (source kernels at the
#                                 backends' width) on CUDA and NVIDIA's Vulkan; the model on cuda
#   scripts/gpu_check.sh fuzz    issue 17 (carry .gl/.whl): the differential fuzzer, FZ_N kernels from FZ_SEED on
#                                 FZ_BACKENDS (default cuda,vulkan) for FZ_TIMEOUT s, 12 workers -> fuzz/, fuzz_gpu.txt
#   scripts/gpu_check.sh session10 (carry .gl/.whl) the tenth session's tests on CUDA and NVIDIA's Vulkan (autotuning on
#                                 a Vulkan GPU, recording timestamps, CUDA source per target, attention's unmasked
#                                 blocks), attn_prefill_wg timed beside SDPA, the model on cuda and vulkan (with the
#                                 Vulkan decode step's per-kernel timestamps) -> model_1b.json
#   scripts/gpu_check.sh session11 (carry .gl/.whl) the tests mended after session10's run, on CUDA and NVIDIA's Vulkan
#   scripts/gpu_check.sh session12 (carry .gl/.whl) the tiny checkpoints on cuda, hip-on-cuda and NVIDIA's Vulkan; the
#                                 eleventh session's changed std tests on cuda and vulkan; the replay of fuzz seed
#                                 710000802
#   scripts/gpu_check.sh session13 (carry .gl/.whl) the twelfth session's new kernel paths' tests on cuda and vulkan
#   scripts/gpu_check.sh gemvq   (carry .gl/.whl) issue 18: gemv_q_warp's tests on cuda/vulkan, then the q4/q8 GEMV rows
#   scripts/gpu_check.sh vfixed  issue 16 (carry .gl/.whl): bench/experiments/vk_fixed_cost.py, a copy kernel 1/2/4/8 times
#                                 back to back on NVIDIA's Vulkan and CUDA: a fixed cost per timed interval vs per dispatch
#   scripts/gpu_check.sh lncfg   issue 18: layer_norm's configurations timed alone (bench/experiments/layer_norm_configs.py),
#                                 beside torch and Triton, then tests/std/test_layer_norm.py on CUDA and NVIDIA's Vulkan
#   scripts/gpu_check.sh vstats  issue 16 (carry .gl/.whl): tests/runtime_vulkan/test_pipeline_stats.py on NVIDIA's Vulkan,
#                                 then iron inspect --resources of RoPE's kernels (Vulkan) and of the split rows' chunk
#                                 kernels (Vulkan and CUDA) -> vulkan_stats.txt, then vk_gemm_stats.py (coopmat2 GEMM)
#   scripts/gpu_check.sh sized   issue 18: torch's copy of a row's own bytes, L2 flushed (bench/experiments/sized_copy.py):
#                                 the ceiling a 32-64 MiB row can reach, beside the 4 GiB one %BW divides by
#   scripts/gpu_check.sh q4cfg   issue 18: mma_q4's and mv_q4's tests on CUDA, then every q4 GEMV configuration timed
#                                 alone (Q4_PATHS="mv warp": those paths' configurations, one path after the other)
#   scripts/gpu_check.sh q4xs    issue 18: gemv_q4_xs (x in registers) tests on CUDA, then its configurations and
#                                 gemv_q_warp's best two (Q4_WARP) at Q4_SHAPES, in turn, twice -> q4xs_{xs,warp}_N.txt;
#                                 Q4_XS="R,MOST,X8[,NS];..." xs configurations of one's own (default: the staged
#                                 kernel's, NS >= 2, beside X8 1/2 at R 8; Q4_XS= skips them); then xs configurations
#                                 Q4_NCU (indices) and, with Q4_NCU_WARP=1, warp under ncu
#   scripts/gpu_check.sh q4src   issue 18: where gemv_q4_xs's time goes: Q4SRC_XS configurations and gemv_q_warp's
#                                 best at 16384/32768 rows of K 16384 (the marginal rate, without the start and the
#                                 tail), with L2 evicted by a read and by the memset flush (Q4SRC_FLUSH), then
#                                 Q4SRC_NCU's first configuration under ncu's source counters (CSV)
#   scripts/gpu_check.sh vkab    issue 16 (carry .gl/.whl): bench/experiments/vk_timing_lead.py's Vulkan rows from a
#                                 carried base tree (VK_BASE, default .snap/old) and this tree, in turn, twice, then
#                                 its CUDA rows once (a SPIR-V change timed against its base: s32's Aliased views)
#   scripts/gpu_check.sh q4ab    issue 18: gemv_q_warp's configurations from this tree and a carried base tree (Q4_BASE),
#                                 in turn, twice (a kernel change timed against its base in one call)
#   scripts/gpu_check.sh topkncu issue 18: each top-k path timed alone beside torch.topk, then two under ncu
#   scripts/gpu_check.sh topksrc issue 18: TOPK_NCU's top-k paths under ncu's source counters (per-SASS-line CSV)
#   scripts/gpu_check.sh attnvar issue 18: attn_prefill_wg's source edited (every block masked, warpgroup ping-pong,
#                                 no block barrier) and timed beside SDPA (bench/experiments/attn_variants.py)
#   scripts/gpu_check.sh modelbench issue 19: iron bench --filter model/ on MB_BACKENDS (default cuda) -> model_bench_*.json
#   scripts/gpu_check.sh decodencu issue 18: each decode split configuration timed beside SDPA, then DECODE_NCU's
#                                 indices under Nsight Compute (bench/experiments/decode_ncu.py)
#   scripts/gpu_check.sh ncu     issue 18/19: the attention prefill kernel under Nsight Compute -> attn_ncu.txt
#   scripts/gpu_check.sh attnwg  issue 18: attn_prefill_wg's configurations (ATTN_CFGS) timed beside torch SDPA
#   scripts/gpu_check.sh wgsweep issue 14: gemm_wg configurations timed alone at WG_SIZES -> wg_sweep.json
#   scripts/gpu_check.sh vgemm   issue 14: the std GEMM on NVIDIA's Vulkan (cooperative matrices) beside CUDA
#                                 (VGEMM_FILTER: which gemm rows; VGEMM_BACKENDS)
#   scripts/gpu_check.sh gemmncu  issue 14: the std GEMM and Triton's at GEMM_SHAPE under Nsight Compute
#   scripts/gpu_check.sh sanitize issue 17: compute-sanitizer memcheck + racecheck over the std kernel tests on CUDA
#   scripts/gpu_check.sh session3 the tests of this session's changes (2026-12-02, 2nd) on CUDA and Vulkan
#   scripts/gpu_check.sh pytest  any tests (PT_TESTS) on PT_BACKENDS (default cuda,vulkan), failures listed (-rfE),
#                                 log named PT_NAME (default pytest_any)
#   scripts/gpu_check.sh valone  issue 14: Vulkan gemm_rs configurations timed alone (bench/experiments/vgemm_alone.py)
#   scripts/gpu_check.sh session4 the tests of the third session of 2026-12-02 on CUDA and NVIDIA's Vulkan (optional
#                                 buffers, subgroup pinning, quantized model, sampled decode recording, gemm_wgp)
#   scripts/gpu_check.sh wgvar   issue 14: gemm_wg's emitted source edited (no fence, no barrier, no loads, no store,
#                                 launch bounds, 2 groups per SM) and timed, to see where its time goes
#   scripts/gpu_check.sh vprofile issue 16: host time per launch on device arrays, Vulkan and CUDA, with cProfile
#   scripts/gpu_check.sh vdiag   issue 16 (carry .gl/.whl): bench/experiments/vk_barrier_cost.py (a launch's cost by
#                                 barrier kind and batch size) and vk_silu_variants.py (what OpFDiv costs) on Vulkan,
#                                 the latter on CUDA beside it; vk_fdiv_contract.py (OpFDiv without NoContraction)
#   scripts/gpu_check.sh vfdiv   vdiag's vk_fdiv_contract.py alone
#   scripts/gpu_check.sh vsilu   issue 16 (carry .gl/.whl): vk_silu_variants.py on Vulkan with and without
#                                 SignedZeroInfNanPreserve, with Iron's precise exp2 and with GLSL Exp2 (VSILU_RUNS:
#                                 backend:IEEE:NATIVE_EXP ...), and on CUDA (silu without OpFDiv: rsqrt + Newton)
#   scripts/gpu_check.sh q4bounds issue 18: gemv_q_warp's configurations unbounded and under each launch bound of
#                                 Q4_BOUNDS_LIST (default "128,6 128,8": 80 and 64 registers) -> gemv_q4_bounds_*.txt
#   scripts/gpu_check.sh cm2     issue 14: bench/experiments/vk_coopmat2_gemm.py (VK_NV_cooperative_matrix2 GEMM)
#   scripts/gpu_check.sh gemmf32 issue 14: iron bench of std/gemm/gemm_f32 on CUDA (every tuning candidate timed)
#   scripts/gpu_check.sh vulkan  (needs .gl/ and .whl/ carried: scripts/gpu_prepare.sh, carry [".gl", ".whl"])
#     4. the conformance suite and the differential fuzzer on NVIDIA's Vulkan driver, cooperative matrices (the
#        fragment and GEMM tests through them, iron bench of the std GEMM), exp/softmax on Vulkan beside CUDA
# Several parts run in order: scripts/gpu_check.sh speed bench. Results go to $OUT/results.tgz (or ./gpu-out): logs, JSON,
# to be committed under bench/results/.
set -uo pipefail
cd "$(dirname "$0")/.."
# The device tool returns at most 8 files: every part writes under a scratch folder and the folder is packed into
# $OUT/results.tgz after each part (and at exit), so a part killed at the call's limit loses only itself.
FINAL=${OUT:-gpu-out}
OUT=${GPU_RAW:-/tmp/gpu-raw}
mkdir -p "$OUT" "$FINAL"
pack() { tar -czf "$FINAL/results.tgz" -C "$OUT" . 2>/dev/null; }
# profile_ncu OUTFILE KERNEL_REGEX SKIP COUNT SCRIPT: Nsight Compute's throughput, stall, occupancy, memory and
# scheduler sections over launches SKIP+1 .. SKIP+COUNT of the kernels matching KERNEL_REGEX in python SCRIPT (its
# environment chooses what it runs), the whole report to $OUT/OUTFILE and its key lines to the log
profile_ncu() {
  timeout ${NCU_TIMEOUT:-90} ncu --kernel-name "regex:$2" --launch-skip "$3" --launch-count "$4" \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats $PY "$5" 2>&1 \
    | tee "$OUT/$1" | grep -E "^  [a-z_]+|Duration|DRAM Throughput|L2 Cache Throughput|Achieved Occupancy|Registers|Stall|Executed Ipc" \
    | head -n 30
}
trap pack EXIT
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 IRON_CACHE_DIR=/tmp/iron-cache IRON_GIT_SHA=${IRON_GIT_SHA:-unknown}
# every autotune candidate's time goes to the logs (stderr), so a run shows which configuration won and by how much
export IRON_AUTOTUNE_LOG=${IRON_AUTOTUNE_LOG:-1}
PY=${PY:-python3}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  $PY -c 'import cuda.core, cuda.bindings, torch, numpy; print("cuda.core", cuda.core.__version__, "bindings", cuda.bindings.__version__, "torch", torch.__version__, "numpy", numpy.__version__)'
  $PY -c 'from iron.codegen import nvrtc; print("nvrtc", nvrtc.nvrtc_version())'
} 2>&1 | tee "$OUT/env.txt"
[ $# -eq 0 ] && set -- cuda
for PART in "$@"; do
pack
echo "== gpu_check part $PART ($(date +%T))"
if [ "$PART" = vulkan ] || [ "$PART" = varrays ] || [ "$PART" = vgemm ] || [ "$PART" = vchanged ] || [ "$PART" = session3 ] || \
   [ "$PART" = valone ] || [ "$PART" = vkab ] || [ "$PART" = session4 ] || [ "$PART" = vprofile ] || [ "$PART" = vdiag ] || [ "$PART" = vfdiv ] || [ "$PART" = vsilu ] || [ "$PART" = cm2 ] || [ "$PART" = session9b ] || [ "$PART" = session9c ] || [ "$PART" = fuzz ] || [ "$PART" = session10 ] || [ "$PART" = session11 ] || [ "$PART" = session12 ] || [ "$PART" = session13 ] || [ "$PART" = gemvq ] || { { [ "$PART" = pytest ] || [ "$PART" = lncfg ] || [ "$PART" = vfixed ] || [ "$PART" = vstats ]; } && [ -d .gl ]; } || \
   { [ "$PART" = lib ] && [ "${LIB_BACKEND:-cuda}" = vulkan ]; } || \
   { { [ "$PART" = model ] || [ "$PART" = modelbench ]; } && [ -d .gl ]; }; then
  if [ ! -d .gl ] || [ ! -d .whl ]; then
    echo "gpu_check vulkan: carry .gl and .whl (scripts/gpu_prepare.sh)" >&2
    exit 2
  fi
  if [ -z "${VULKAN_READY:-}" ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=$PYTHONPATH:/tmp/site VULKAN_READY=1
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    J=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    [ -f "$J" ] && export VK_DRIVER_FILES=$J
    $PY -c 'import json, iron.runtime as r; print(json.dumps(r.get_backend("vulkan").info(), default=str))' \
      2>&1 | tee -a "$OUT/env.txt"
  fi
fi
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
done
