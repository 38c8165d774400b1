#!/bin/sh
# Builds the test suite under sanitizers and runs it.
#   scripts/sanitize.sh [asan|tsan|all] [meson test args...]
# asan: AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)
# tsan: ThreadSanitizer (build-tsan/)
# CUDA and the benchmarks are left out of these builds (device code is not
# instrumented; the benchmarks are not tests). Any report fails the run.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
which="${1:-all}"
[ $# -gt 0 ] && shift
. "$here/scripts/sanitizer_env.sh"
run() {
  name=$1
  shift
  sanitizer_build "$name"
  meson test -C "$here/build-$name" --print-errorlogs --num-processes 1 --timeout-multiplier 4 "$@"
}
case "$which" in
  asan|tsan) run "$which" "$@" ;;
  all) run asan "$@" && run tsan "$@" ;;
  *) echo "usage: $0 [asan|tsan|all] [meson test args]" >&2; exit 2 ;;
esac
