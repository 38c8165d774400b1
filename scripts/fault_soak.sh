#!/bin/sh
# Fault-injection soak by one command (tests/soak/fault_soak.cpp): rounds of
# 2-5 ranks doing random verified collectives and point to point over shared
# memory and tcp (loopback) while the driver kills, stops, resumes and
# aborts ranks and drops their tcp connections (ss -K). Fails on a wrong
# result, a hang, a survivor that reports late, or a leaked segment.
#   scripts/fault_soak.sh [release|asan|tsan|all] [fault_soak args...]
# release uses ./build (scripts/build.sh); asan and tsan build build-asan/
# and build-tsan/ as scripts/sanitize.sh does. Default: release for 600 s.
# Under the sanitizers the bounds are widened (instrumented code is 2-10x
# slower) unless given.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
mode="${1:-release}"
[ $# -gt 0 ] && shift
export ZC_SOCKET_IFNAME=lo
command -v ss >/dev/null || { echo "fault_soak.sh: 'ss' (iproute2) is needed for the drop fault" >&2; exit 2; }
. "$here/scripts/sanitizer_env.sh"
soak() {
  dir=$1
  shift
  echo "== fault soak: $dir $*"
  "$dir/tests/soak/fault_soak" "$@"
}
case "$mode" in
  release)
    sh "$here/scripts/build.sh" "$here/build" >/dev/null
    soak "$here/build" --seconds 600 "$@" ;;
  asan|tsan)
    sanitizer_build "$mode"
    soak "$here/build-$mode" --seconds 600 --detect-ms 3000 --finalize-ms 6000 "$@" ;;
  all)
    sh "$0" release "$@" && sh "$0" asan "$@" && sh "$0" tsan "$@" ;;
  *) echo "usage: $0 [release|asan|tsan|all] [fault_soak args]" >&2; exit 2 ;;
esac
