#!/bin/sh
# Long coverage-guided fuzzing of every parser that reads bytes from outside
# the process (docs/fuzzing.md), with libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer:
#   scripts/fuzz.sh [runs] [target...]
# runs: executions per target (default 10000000); targets: default all.
# Configures build-fuzz (clang; only the fuzz targets are built), runs the
# targets one at a time at low priority, each starting from its seed corpus
# (tests/fuzz/corpus/<target>, read only) plus what earlier runs found
# (build-fuzz/corpus/<target>). Prints executions, exec/s, coverage and the
# exit status per target; exits non-zero if any target failed. A crashing
# input is left in build-fuzz/artifacts/<target>/.
# ZC_FUZZ_MAX_TIME=<s> also stops each target after s seconds (a loaded
# machine); the table then shows the count reached.
# Needs clang and libFuzzer: scripts/setup.sh --fuzz.
set -eu
cd "$(dirname "$0")/.."
runs=${1:-10000000}
[ $# -gt 0 ] && shift
all="store_request store_reply auth tcp_wire peer_info p2p_meta coll_check ps_protocol mem_region unique_id"
targets=${*:-$all}
build=${ZC_FUZZ_BUILD:-build-fuzz}

if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: clang++ not found (scripts/setup.sh --fuzz)" >&2
  exit 2
fi
if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  # -fno-sanitize-recover: undefined behaviour aborts, so libFuzzer reports it.
  CC=clang CXX=clang++ meson setup "$build" -Dfuzz=true -Dtests=false -Dperf=false \
    -Dcuda=disabled -Dbuildtype=debugoptimized -Db_sanitize=address,undefined \
    -Db_lundef=false -Dc_args=-fno-sanitize-recover=undefined \
    -Dcpp_args=-fno-sanitize-recover=undefined >"$build/setup.log" 2>&1 || {
    cat "$build/setup.log" >&2
    exit 2
  }
fi
ninja_targets=""
for t in $targets; do ninja_targets="$ninja_targets tests/fuzz/fuzz_$t"; done
# shellcheck disable=SC2086
ninja -C "$build" -j "${ZC_FUZZ_JOBS:-2}" $ninja_targets >/dev/null

mkdir -p "$build/logs"
failed=0
printf '%-14s %12s %9s %8s %6s  %s\n' target executions exec/s cov: rc result
for t in $targets; do
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t"
  log="$build/logs/$t.log"
  rc=0
  limit=""
  [ -n "${ZC_FUZZ_MAX_TIME:-}" ] && limit="-max_total_time=$ZC_FUZZ_MAX_TIME"
  # One process per target (no -jobs/-workers): the machine is shared.
  nice -n 10 "$build/tests/fuzz/fuzz_$t" -runs="$runs" -timeout=10 -rss_limit_mb=2048 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t/" $limit \
    "$build/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  result=ok
  if [ "$rc" != 0 ]; then
    result="FAILED: $(grep -m1 -E 'ERROR: |runtime error|SUMMARY' "$log" || echo "see $log")"
    failed=1
  fi
  printf '%-14s %12s %9s %8s %6s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov:-?}" "$rc" "$result"
done
echo "logs: $build/logs/; new inputs: $build/corpus/; crashes: $build/artifacts/"
exit $failed
