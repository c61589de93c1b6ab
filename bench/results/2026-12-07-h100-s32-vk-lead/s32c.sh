#!/usr/bin/env bash
# session 32: the timing-lead experiment (one process), then s32b's bench rows. Packed into $OUT/s32c.tgz.
set -u
R=/tmp/s32c; mkdir -p $R; cp .snap/sha.txt $R/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/gpu.txt
pip_ok() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl; }
pip_ok; for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
J=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f "$J" ] && export VK_DRIVER_FILES=$J
(PYTHONPATH=$PWD/src:/tmp/site timeout 150 python3 bench/experiments/vk_timing_lead.py $R/vk_timing_lead.json 2>&1 | tail -n 12) | tee $R/vk_timing_lead.txt
tar -czf $OUT/s32c.tgz -C $R .
