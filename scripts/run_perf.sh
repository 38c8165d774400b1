#!/bin/sh
# Runs the benchmark suite: zcomm vs Open MPI, Gloo, torch.distributed, gRPC;
# the parameter server vs a gRPC parameter server (Table 2 models); the
# engine's overhead; communicator creation. Exits non-zero when a zcomm run
# fails or is wrong, or when a peer that setup.sh --perf installs is missing.
#   scripts/run_perf.sh [--quick|--smoke] [BUILDDIR] [-- extra run_suite.py options]
# (--smoke: tiny sizes once, to check that every program runs; seconds.)
# BUILDDIR defaults to ./build. Builds the benchmarks first (ninja -j2),
# then runs perf/run_suite.py with Debian's /usr/bin/python3. Results go to
# perf/results/ (results.json, summary.md, logs/, *.png); plots are copied
# into docs/img/.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
quick=""
build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick="--quick"; shift ;;
    --smoke) quick="--smoke"; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    --) shift; break ;;
    -*) break ;;
    *) if [ -z "$build" ]; then build="$1"; shift; else break; fi ;;
  esac
done
[ -n "$build" ] || build="$here/build"
if [ ! -d "$build" ]; then
  echo "run_perf.sh: build directory $build not found; run: meson setup $build $here" >&2
  exit 2
fi
# Build what is buildable; a peer benchmark that fails to build shows as
# missing in the suite (which then exits non-zero).
ninja -C "$build" -j2 || echo "run_perf.sh: the build had errors; running what was built" >&2
exec /usr/bin/python3 "$here/perf/run_suite.py" --build "$build" $quick "$@"
