#!/bin/sh
# Configures (first time) and builds zcomm.
#   scripts/build.sh [BUILDDIR] [meson options...]
# BUILDDIR defaults to ./build. CUDA is picked up from /usr/local/cuda when
# nvcc is not on PATH; every optional feature is auto-detected (see the
# summary meson prints).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build="${1:-$here/build}"
[ $# -gt 0 ] && shift
[ -x /usr/local/cuda/bin/nvcc ] && PATH="$PATH:/usr/local/cuda/bin" && export PATH
if [ -f "$build/build.ninja" ]; then
  [ $# -gt 0 ] && meson configure "$build" "$@"
else
  meson setup "$build" "$here" "$@"
fi
ninja -C "$build" -j"$(nproc)"
