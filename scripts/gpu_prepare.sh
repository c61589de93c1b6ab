#!/usr/bin/env bash
# Run HERE (not on the GPU machine) before a device call that needs Vulkan: the H200 image has no Vulkan loader and
# no registry, so the loader's .deb files (.gl/) and the `vulkan` cffi bindings' wheels for its Python 3.12 (.whl/)
# travel with the call (device tool: carry [".gl", ".whl"]). Both folders are git-ignored via .git/info/exclude.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gl/' .git/info/exclude || echo /.gl/ >> .git/info/exclude
grep -qx '/.whl/' .git/info/exclude || echo /.whl/ >> .git/info/exclude
mkdir -p .gl .whl /tmp/amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
apt-get $o update -qq
(cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl vulkan==1.3.275.1 cffi pycparser
ls .gl .whl
