#!/usr/bin/env bash
# Fetches, on a machine with a network, the wheels perf/device_check.sh installs on a GPU
# machine without one: nvImageCodec (CUDA 13 build) with nvJPEG 13.0, and simplejpeg, for
# CPython 3.12 on x86-64 Linux (the device image's Python). They land in ./.whl (git
# ignores it through .git/info/exclude), about 30 MB; carry .whl with the working tree.
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.whl/' >> .git/info/exclude; }
PYV="${PYV:-3.12}"
python3 -m pip download --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  "nvidia-nvimgcodec-cu13>=0.9,<0.10" "nvidia-nvjpeg>=13.0,<13.1" "simplejpeg>=1.7"
ls -la .whl
