#!/bin/sh
# The GPU check: on a machine with an NVIDIA GPU, builds zcomm with CUDA,
# runs the GPU tests on the real driver and the GPU benchmarks, and prints
# the figures docs/gpu.md records (about 8 minutes at most, or
# ZC_GPU_CHECK_SECONDS: every step has its own time limit).
#
#   sh scripts/gpu_check.sh [--dry-run] [--no-build] [BUILDDIR]
#   sh scripts/gpu_check.sh --pack DIR [--no-build] [BUILDDIR]
#   sh DIR/gpu_check.sh --packed
#
# BUILDDIR defaults to build-gpu. --no-build uses BUILDDIR as it is.
# --pack builds where the build's dependencies are (GoogleTest, nlohmann-
# json, meson) and copies what the check runs into DIR: the test and
# benchmark programs, zcrun, the list of tests and this script. The build
# leaves out PMIx, hwloc and verbs, so the programs need only the C and C++
# runtime and the GPU machine's libcuda; DIR is about 35 MB. On the GPU
# machine (x86-64, glibc and libstdc++ at least as new), --packed runs the
# check from DIR with no build and no meson.
# --dry-run runs nothing that needs a GPU or a build: it prints every
# command it would run, and passes a sample benchmark table through the
# same summaries (so the script is checked anywhere: the gpu suite runs
# it as gpu_check_dry_run).
#
# Figures printed at the end:
#   - staged allreduce vs host-only, >= 4 MiB, 2 ranks: blocking staged in
#     pipelined parts (ZC_GPU_IPC=0, default ZC_GPU_CHUNK_BYTES), blocking
#     staged whole (ZC_GPU_CHUNK_BYTES=0, for comparison) and stream-ordered
#     pipelined (--on-stream); goal <= 1.15x
#   - reduction kernel vs cuMemcpyDtoD, >= 1 MiB; goal >= 85%
#   - CUDA IPC allreduce on 2, 3 and 4 processes (ZC_GPU_IPC=1)
#   - CUDA IPC broadcast, allgather, reduce-scatter, alltoall on 2 and 4
#     processes (ZC_GPU_IPC=1), >= 4 MiB, against the same call on host memory
#   - small device messages: 4 KiB and 64 KiB rows of the runs above
#
# The Python step runs tests/python/test_cuda_array_device.py (CuPy arrays
# and torch CUDA tensors through __cuda_array_interface__) on 2, 3 and 4
# ranks with the Python that has CuPy or a CUDA torch (ZC_GPU_PYTHON,
# default python3). It compiles the extension module _zcomm for that Python
# (its headers and pybind11, g++), against the build's libzcomm.so, into a
# temporary package: the GPU machine's Python need not be the build's.
set -eu

dry=0
build_it=1
build=""
pack=""
packed=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --no-build) build_it=0 ;;
    --pack) [ $# -ge 2 ] || { echo "gpu_check: --pack needs a folder" >&2; exit 2; }; pack="$2"; shift ;;
    --packed) packed=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "gpu_check: unknown option $1" >&2; exit 2 ;;
    *) build="$1" ;;
  esac
  shift
done
if [ "$packed" = 1 ]; then
  # Run from the packed folder: it is the build (same layout), nothing to build.
  build=$(cd "$(dirname "$0")" && pwd)
  here="$build"
  build_it=0
else
  here=$(cd "$(dirname "$0")/.." && pwd)
  build="${build:-$here/build-gpu}"
fi
# The GPU tests, in the order they run: the device tests first, the
# every-dtype allreduce tests last (with the time left after the
# benchmarks). The tests on the fake driver run in every test run (CI).
first_tests="gpu_reduce_kernels gpu_pointer_classify gpu_cudahook gpu_coll_on_stream gpu_coll_plan
  gpu_coll_engine gpu_coll_others gpu_coll_others_ipc gpu_coll_errors gpu_coll_mixed_across_ranks"
last_tests="gpu_coll_allreduce_staged gpu_coll_allreduce_auto gpu_coll_allreduce"
# One line per test: name, timeout, environment, command (tab-separated;
# build paths as @B@/...), from the build's own test definitions.
list_tests() {
  meson introspect --tests "$build" | python3 -c '
import json, sys
build = sys.argv[1].rstrip("/") + "/"
rel = lambda v: v.replace(build, "@B@/")
for t in json.load(sys.stdin):
    env = " ".join(k + "=" + rel(v) for k, v in sorted(t["env"].items()))
    print("\t".join([t["name"], str(t["timeout"]), env, " ".join(rel(a) for a in t["cmd"])]))
' "$build"
}
out=$(mktemp -d /tmp/zc-gpu-check.XXXXXX)
trap 'rm -rf "$out"' EXIT
start=$(date +%s)
export ZC_SOCKET_IFNAME="${ZC_SOCKET_IFNAME:-lo}"

say() { printf '\n== %s (%ss)\n' "$*" "$(( $(date +%s) - start ))"; }

# run LIMIT_S LOGNAME CMD...: runs CMD under a time limit, output to the
# terminal and to $out/LOGNAME; a failure is reported and the check goes on.
run() {
  limit=$1; log=$2; shift 2
  echo "+ timeout $limit $*"
  [ "$dry" = 1 ] && return 0
  if timeout "$limit" "$@" > "$out/$log" 2>&1; then
    cat "$out/$log"
  else
    rc=$?
    cat "$out/$log"
    echo "gpu_check: FAILED (exit $rc): $*"
    failures=$((failures + 1))
  fi
}
failures=0

# gpu_allreduce's table -> ratio rows from min_bytes up (column 7: dev/host).
# zcrun tags each line "[rank] ": the tag is dropped first.
ratio_rows() {
  awk -v min="$1" -v label="$2" '
    { sub(/^\[[0-9]+\] */, "") }
    $1 !~ /^[0-9]+$/ || NF < 7 { next }
    $1 + 0 >= min + 0 { printf "  %-34s %10d bytes  host %9.1f us  device %9.1f us  %5.2fx\n", label, $1, $2, $4, $6 }'
}
small_rows() {
  awk -v label="$1" '
    { sub(/^\[[0-9]+\] */, "") }
    $1 !~ /^[0-9]+$/ || NF < 7 { next }
    $1 == 4096 || $1 == 65536 { printf "  %-34s %10d bytes  host %9.1f us  device %9.1f us\n", label, $1, $2, $4 }'
}
# gpu_bench's kernel table -> rows from 1 MiB up (columns: bytes type op
# time(us) kernelGB/s copyGB/s ratio%).
kernel_rows() {
  awk '/reduction kernels vs cuMemcpyDtoD/ { on = 1; next }
       on && $1 ~ /^[0-9]+$/ && $1 + 0 >= 1048576 { printf "  %10d %-9s %-5s kernel %8.1f GB/s  copy %8.1f GB/s  %s\n", $1, $2, $3, $5, $6, $NF }'
}

summary() {
  say "figures"
  echo "staged allreduce vs host-only (>= 4 MiB, goal <= 1.15x):"
  [ -f "$out/staged2" ] && ratio_rows 4194304 "2 ranks, blocking pipelined" < "$out/staged2"
  [ -f "$out/staged2_whole" ] && ratio_rows 4194304 "2 ranks, blocking staged whole" < "$out/staged2_whole"
  [ -f "$out/stream2" ] && ratio_rows 4194304 "2 ranks, on_stream pipelined" < "$out/stream2"
  echo "reduction kernel vs cuMemcpyDtoD (>= 1 MiB, goal >= 85%):"
  [ -f "$out/bench" ] && kernel_rows < "$out/bench"
  echo "CUDA IPC allreduce (ZC_GPU_IPC=1):"
  for n in 2 3 4; do [ -f "$out/ipc$n" ] && ratio_rows 0 "$n ranks, cuda_ipc" < "$out/ipc$n"; done
  echo "CUDA IPC broadcast, allgather, reduce-scatter, alltoall (ZC_GPU_IPC=1, >= 4 MiB):"
  for op in broadcast allgather reduce_scatter alltoall; do
    for n in 2 4; do
      [ -f "$out/ipc_${op}_$n" ] && ratio_rows 4194304 "$n ranks, $op cuda_ipc" < "$out/ipc_${op}_$n"
    done
  done
  echo "small device messages:"
  [ -f "$out/staged2" ] && small_rows "2 ranks, blocking staged" < "$out/staged2"
  [ -f "$out/stream2" ] && small_rows "2 ranks, on_stream" < "$out/stream2"
  for n in 2 4; do [ -f "$out/ipc$n" ] && small_rows "$n ranks, cuda_ipc" < "$out/ipc$n"; done
  return 0
}

if [ "$dry" = 1 ]; then
  echo "gpu_check: dry run: commands are printed, not run"
else
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  fi
fi

if [ "$build_it" = 1 ]; then
  say "build (CUDA)"
  if [ -n "$pack" ]; then
    run 900 build sh "$here/scripts/build.sh" "$build" -Dcuda=enabled -Dpmix=disabled -Dhwloc=disabled -Dverbs=disabled
  else
    run 180 build sh "$here/scripts/build.sh" "$build" -Dcuda=enabled
  fi
fi

[ -d "$build" ] && build=$(cd "$build" && pwd)  # meson names files by absolute path

if [ -n "$pack" ]; then
  # Copy every file the check runs, at its place under the build, to $pack.
  [ "$dry" = 1 ] && { echo "gpu_check: would pack $build into $pack"; exit 0; }
  [ "$failures" = 0 ] || exit 1
  mkdir -p "$pack"
  list_tests | awk -F '\t' -v want=" $(echo $first_tests $last_tests) " 'index(want, " " $1 " ")' > "$pack/gpu_tests.list"
  for f in launcher/zcrun perf/gpu/gpu_allreduce perf/gpu/gpu_bench \
      $(tr '\t =' '\n\n\n' < "$pack/gpu_tests.list" | sed -n 's|^@B@/||p' | sort -u); do
    if [ -d "$build/$f" ]; then mkdir -p "$pack/$f"
    elif [ -f "$build/$f" ]; then mkdir -p "$pack/$(dirname "$f")" && cp "$build/$f" "$pack/$f"
    fi
  done
  for f in "$build"/libzcomm.so*; do [ -d "$f" ] || cp -P "$f" "$pack/"; done
  mkdir -p "$pack/pysrc/zcomm/trace" "$pack/pysrc/include/zcomm" "$pack/pysrc/tests"
  cp "$here"/python/zcomm/*.py "$here"/python/zcomm/*.cpp "$here"/python/zcomm/*.h "$pack/pysrc/zcomm/"
  cp "$here"/python/zcomm/trace/*.py "$pack/pysrc/zcomm/trace/"
  cp "$here"/include/zcomm/*.h "$pack/pysrc/include/zcomm/"
  cp "$here"/tests/python/zctest.py "$here"/tests/python/test_cuda_array_device.py "$pack/pysrc/tests/"
  cp "$0" "$pack/gpu_check.sh"
  echo "gpu_check: packed into $pack ($(du -sh "$pack" | cut -f1)); on the GPU machine: sh $pack/gpu_check.sh --packed"
  exit 0
fi

# What is left of the 8 minutes (ZC_GPU_CHECK_SECONDS), minus `reserve`
# seconds (at least 30).
left() {
  l=$(( ${ZC_GPU_CHECK_SECONDS:-480} - ($(date +%s) - start) - $1 ))
  [ "$l" -lt 30 ] && l=30
  echo "$l"
}

# gpu_tests LIMIT_S LOGNAME TEST...: runs the named tests one after the
# other as the test suite defines them, all within LIMIT_S; a test that
# fails, times out or skips (exit 77: no GPU seen) counts as a failure.
gpu_tests() {
  limit=$1; log=$2; shift 2
  if [ "$dry" = 1 ]; then echo "+ the tests $* (each as tests/gpu/meson.build runs it)"; return 0; fi
  if [ "$packed" = 1 ]; then list="$build/gpu_tests.list"; else list="$out/gpu_tests.list"; list_tests > "$list"; fi
  until=$(( $(date +%s) + limit ))
  for t in "$@"; do
    line=$(awk -F '\t' -v t="$t" '$1 == t' "$list")
    if [ -z "$line" ]; then echo "gpu_check: FAILED: no test $t in this build"; failures=$((failures + 1)); continue; fi
    own=$(printf '%s' "$line" | cut -f2)
    envs=$(printf '%s' "$line" | cut -f3 | sed "s|@B@|$build|g")
    cmd=$(printf '%s' "$line" | cut -f4 | sed "s|@B@|$build|g")
    l=$(( until - $(date +%s) ))
    [ "$own" -lt "$l" ] && l=$own
    if [ "$l" -lt 5 ]; then echo "gpu_check: FAILED: no time left for $t"; failures=$((failures + 1)); continue; fi
    t0=$(date +%s)
    rc=0
    # shellcheck disable=SC2086 # envs and cmd are word lists (no spaces inside a word)
    env $envs timeout "$l" $cmd >> "$out/$log" 2>&1 || rc=$?
    case $rc in
      0) echo "  $t: ok ($(( $(date +%s) - t0 )) s)" ;;
      77) echo "  $t: SKIP (no GPU seen)"; failures=$((failures + 1)) ;;
      *) echo "  $t: FAILED (exit $rc, $(( $(date +%s) - t0 )) s)"; failures=$((failures + 1))
         tail -n 20 "$out/$log" ;;
    esac
  done
}

# The zcomm package for $py in $out/py: the pure-Python files and _zcomm
# compiled for $py, linked with the build's libzcomm.so (rpath to it).
python_package() {
  if [ "$packed" = 1 ]; then src="$build/pysrc/zcomm"; inc="$build/pysrc/include"
  else src="$here/python/zcomm"; inc="$here/include"; fi
  pkg="$out/py/zcomm"
  mkdir -p "$pkg/trace"
  cp "$src"/*.py "$pkg/" && cp "$src"/trace/*.py "$pkg/trace/" || return 1
  if ! suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))') ||
     ! flags=$("$py" -c 'import pybind11, sysconfig; print("-I" + pybind11.get_include(), "-I" + sysconfig.get_paths()["include"])'); then
    echo "gpu_check: $py has no pybind11"; return 1
  fi
  objs=""
  for f in _zcomm comm_handle comm_elastic request_handle ps_handle; do
    # shellcheck disable=SC2086 # flags is a word list
    ${CXX:-g++} -std=c++20 -O2 -fPIC -fvisibility=hidden -I"$inc" -I"$src" $flags \
      -c "$src/$f.cpp" -o "$out/py/$f.o" &
    objs="$objs $out/py/$f.o"
  done
  wait
  # shellcheck disable=SC2086 # objs is a word list
  ${CXX:-g++} -shared $objs -L"$build" -lzcomm -Wl,-rpath,"$build" -o "$pkg/_zcomm$suffix"
}

python_step() {
  py="${ZC_GPU_PYTHON:-python3}"
  if [ "$dry" = 1 ]; then
    echo "+ compile _zcomm for $py into a temporary package; zcrun -np 2, 3, 4 $py test_cuda_array_device.py"
    return 0
  fi
  if ! python_package > "$out/py_build" 2>&1; then
    cat "$out/py_build"; echo "gpu_check: FAILED: the Python package for $py"
    failures=$((failures + 1)); return 0
  fi
  if [ "$packed" = 1 ]; then t="$build/pysrc/tests"; else t="$here/tests/python"; fi
  # A run that skips (no GPU seen) exits 77: a failure here.
  for n in 2 3 4; do
    run 120 "py$n" env PYTHONPATH="$out/py" PYTHONDONTWRITEBYTECODE=1 ZC_TIMEOUT=60 \
      "$build/launcher/zcrun" --timeout 110 -np "$n" "$py" "$t/test_cuda_array_device.py"
  done
}

say "gpu tests, real driver: kernels, stream-ordered, plans, engine, other collectives (staged and CUDA IPC)"
gpu_tests "$(left 330)" tests $first_tests

say "benchmarks"
zcrun="$build/launcher/zcrun"
ar="$build/perf/gpu/gpu_allreduce"
run 30 bench "$build/perf/gpu/gpu_bench" --quick
run 30 staged2 env ZC_GPU_IPC=0 "$zcrun" -np 2 "$ar" --quick
run 30 staged2_whole env ZC_GPU_IPC=0 ZC_GPU_CHUNK_BYTES=0 "$zcrun" -np 2 "$ar" --quick
run 30 stream2 env ZC_GPU_IPC=0 "$zcrun" -np 2 "$ar" --quick --on-stream
for n in 2 3 4; do
  run 30 "ipc$n" env ZC_GPU_IPC=1 "$zcrun" -np "$n" "$ar" --quick
done
for op in broadcast allgather reduce_scatter alltoall; do
  for n in 2 4; do
    run 20 "ipc_${op}_$n" env ZC_GPU_IPC=1 "$zcrun" -np "$n" "$ar" --quick --op "$op"
  done
done

say "python: __cuda_array_interface__ on the GPU (CuPy, torch)"
python_step

say "gpu tests, real driver: allreduce, every dtype and op (the time left)"
gpu_tests "$(left 10)" tests_allreduce $last_tests

if [ "$dry" = 1 ]; then
  # The summaries on sample tables (the shapes the programs print).
  cat > "$out/staged2" <<'EOF'
# gpu_allreduce: 2 ranks, float32 sum, 1 GPU(s); time per call (us), algbw GB/s
        bytes      host_us  host_GB/s    device_us   dev_GB/s dev/host device algorithm
        4096          4.1       1.00        280.0       0.01    68.29 shm
       65536         11.8       5.55         42.0       1.56     3.56 shm
     4194304        840.0       4.99       1085.0       3.87     1.29 shm
    16777216       3382.0       4.96       4521.0       3.71     1.34 shm
EOF
  sed 's/^/[0] /' "$out/staged2" > "$out/ipc2"  # as zcrun tags it
  cp "$out/staged2" "$out/staged2_whole"
  cp "$out/staged2" "$out/ipc_alltoall_2"
  printf '\nreduction kernels vs cuMemcpyDtoD (GB/s = 1e9 bytes moved / s)\n%s\n%s\n%s\n' \
    "     bytes type      op      time(us) kernelGB/s   copyGB/s    ratio" \
    "   1048576 float32   sum          4.5      697.8      461.5     151%" \
    "  67108864 float32   sum         50.9     3952.0     3880.2     102%" > "$out/bench"
  summary | tee "$out/figures"
  grep -q "2 ranks, cuda_ipc  *4194304 bytes" "$out/figures" &&
    grep -q "1048576 float32   sum   kernel    697.8 GB/s  copy    461.5 GB/s  151%" "$out/figures" ||
    { echo "gpu_check: the summaries found no rows in the sample tables"; exit 1; }
  echo
  echo "gpu_check: dry run done (the figures above come from sample tables, not from a GPU)"
  exit 0
fi

summary
say "done: $failures failed step(s)"
[ "$failures" = 0 ]
