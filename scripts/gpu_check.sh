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
#   scripts/gpu_check.sh largest issue 18: iron bench -v at each kernel's largest device shape only
#                                 (bench/experiments/bench_largest.py) for LG_PATTERNS (default std/rope std/norm) in
#                                 LG_DTYPES (default bf16) on LG_BACKEND (default cuda) -> largest.json, largest.txt
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
for PART_FILE in scripts/gpu_parts/*.sh; do  # the parts, split out of this file (s35): each guarded by its PART
  . "$PART_FILE"
done
done
