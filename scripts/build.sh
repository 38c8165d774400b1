#!/bin/sh
# Configures (or reconfigures) and builds zcomm.
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
  # Reconfigure every time (seconds): what setup.sh installed since the last
  # build (Gloo, gRPC, torch...) is detected, not silently left out.
  meson setup --reconfigure "$build" "$here" "$@"
else
  meson setup "$build" "$here" "$@"
fi
ninja -C "$build" -j"$(nproc)"
