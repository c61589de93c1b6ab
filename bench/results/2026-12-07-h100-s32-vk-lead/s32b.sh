#!/usr/bin/env bash
# session 32: Vulkan rows with and without the timing lead (IRON_VULKAN_TIMING_LEAD=0 / default), beside CUDA, each
# kernel of $KS in turn (iron bench -v, bf16, device shapes); packed into $OUT/s32b.tgz after each step.
set -u
R=/tmp/s32b; mkdir -p $R; cp .snap/sha.txt $R/
pk() { tar -czf $OUT/s32b.tgz -C $R . ; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
for K in ${KS:-std/rope/rotate_half std/norm/layer_norm}; do
  for V in 1 0; do
    IRON_VULKAN_TIMING_LEAD=$V GPU_RAW=$R/raw FINAL=$R/fin LIB_TAG=_vk$V LIB_BACKEND=vulkan LIB_TIMEOUT=${T:-75} \
      LIB_KERNELS="$K" bash scripts/gpu_check.sh lib; pk
  done
  GPU_RAW=$R/raw FINAL=$R/fin LIB_TAG=_cuda LIB_BACKEND=cuda LIB_TIMEOUT=${T:-75} LIB_KERNELS="$K" \
    bash scripts/gpu_check.sh lib; pk
done
rm -rf $R/fin; pk
