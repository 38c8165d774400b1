# Sourced by scripts/sanitize.sh and scripts/fault_soak.sh: how the
# sanitizer builds are configured and what their runtime options are.
# sanitizer_build asan|tsan configures (once) and builds build-asan/ or
# build-tsan/: CUDA and the benchmarks are left out (device code is not
# instrumented; the benchmarks are not tests).
sanitizer_common="-Dcuda=disabled -Dperf=false -Dbuildtype=debugoptimized -Db_ndebug=false"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:halt_on_error=1:suppressions=$here/scripts/asan.supp"
export LSAN_OPTIONS="suppressions=$here/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$here/scripts/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$here/scripts/tsan.supp"
sanitizer_build() {
  case "$1" in
    asan) opts="-Db_sanitize=address,undefined -Db_lundef=false" ;;
    tsan) opts="-Db_sanitize=thread -Db_lundef=false" ;;
    *) echo "sanitizer_build: asan or tsan, not '$1'" >&2; return 2 ;;
  esac
  dir="$here/build-$1"
  if [ ! -f "$dir/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$dir" "$here" $sanitizer_common $opts
  fi
  ninja -C "$dir" -j"$(nproc)"
}
