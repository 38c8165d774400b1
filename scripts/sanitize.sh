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
common="-Dcuda=disabled -Dperf=false -Dbuildtype=debugoptimized -Db_ndebug=false"
run() {
  name=$1 opts=$2
  shift 2
  dir="$here/build-$name"
  if [ ! -f "$dir/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$dir" "$here" $common $opts
  fi
  ninja -C "$dir" -j"$(nproc)"
  meson test -C "$dir" --print-errorlogs --num-processes 1 --timeout-multiplier 4 "$@"
}
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$here/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$here/scripts/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
case "$which" in
  asan) run asan "-Db_sanitize=address,undefined -Db_lundef=false" "$@" ;;
  tsan) run tsan "-Db_sanitize=thread -Db_lundef=false" "$@" ;;
  all)  run asan "-Db_sanitize=address,undefined -Db_lundef=false" "$@" &&
        run tsan "-Db_sanitize=thread -Db_lundef=false" "$@" ;;
  *) echo "usage: $0 [asan|tsan|all] [meson test args]" >&2; exit 2 ;;
esac
