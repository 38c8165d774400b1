#!/bin/sh
# The GPU check: on a machine with an NVIDIA GPU, builds zcomm with CUDA,
# runs the gpu test suite on the real driver and the GPU benchmarks, and
# prints the figures docs/gpu.md records (about 8 minutes at most: every
# step has its own time limit).
#
#   sh scripts/gpu_check.sh [--dry-run] [--no-build] [BUILDDIR]
#
# BUILDDIR defaults to build-gpu. --no-build uses BUILDDIR as it is.
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
set -eu

dry=0
build_it=1
build=""
for a in "$@"; do
  case "$a" in
    --dry-run) dry=1 ;;
    --no-build) build_it=0 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    -*) echo "gpu_check: unknown option $a" >&2; exit 2 ;;
    *) build="$a" ;;
  esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
build="${build:-$here/build-gpu}"
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
ratio_rows() {
  awk -v min="$1" -v label="$2" '
    $1 !~ /^[0-9]+$/ || NF < 7 { next }
    $1 + 0 >= min + 0 { printf "  %-34s %10d bytes  host %9.1f us  device %9.1f us  %5.2fx\n", label, $1, $2, $4, $6 }'
}
small_rows() {
  awk -v label="$1" '
    $1 !~ /^[0-9]+$/ || NF < 7 { next }
    $1 == 4096 || $1 == 65536 { printf "  %-34s %10d bytes  host %9.1f us  device %9.1f us\n", label, $1, $2, $4 }'
}
# gpu_bench's kernel table -> rows from 1 MiB up (columns: bytes type op kernel copy ... ratio%).
kernel_rows() {
  awk '/reduction kernels vs cuMemcpyDtoD/ { on = 1; next }
       on && $1 ~ /^[0-9]+$/ && $1 + 0 >= 1048576 { printf "  %10d %-9s %-5s kernel %8.1f GB/s  copy %8.1f GB/s  %s\n", $1, $2, $3, $4, $5, $NF }'
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
  run 180 build sh "$here/scripts/build.sh" "$build" -Dcuda=enabled
fi

# What is left of the 8 minutes, minus `reserve` seconds (at least 30).
left() {
  l=$(( 480 - ($(date +%s) - start) - $1 ))
  [ "$l" -lt 30 ] && l=30
  echo "$l"
}

# The tests that have not run on a GPU before, the fake-driver tests and the
# quick device tests first; the every-dtype allreduce tests last, with the
# time left after the benchmarks.
say "gpu tests, real driver: stream-ordered, plans, other collectives (staged and CUDA IPC), kernels"
run "$(left 330)" tests meson test -C "$build" --print-errorlogs gpu_coll_on_stream gpu_coll_plan \
  gpu_coll_mixed_across_ranks gpu_coll_others gpu_coll_others_ipc gpu_coll_errors gpu_coll_engine gpu_reduce_kernels \
  gpu_pointer_classify gpu_cudahook gpu_fake_cuda gpu_stream_every_call gpu_stream_pipelined \
  gpu_stream_errors gpu_ipc_collectives gpu_ipc_errors gpu_pipelined_allreduce gpu_pipelined_others \
  gpu_pipelined_errors
if [ "$dry" = 0 ] && grep -q "gpu_coll_.*SKIP" "$out/tests" 2>/dev/null; then
  echo "gpu_check: FAILED: device tests skipped (no GPU seen by the tests)"
  failures=$((failures + 1))
fi

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

say "gpu tests, real driver: allreduce, every dtype and op (the time left)"
run "$(left 10)" tests_allreduce meson test -C "$build" --print-errorlogs gpu_coll_allreduce \
  gpu_coll_allreduce_auto gpu_coll_allreduce_staged

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
  cp "$out/staged2" "$out/ipc2"
  cp "$out/staged2" "$out/staged2_whole"
  cp "$out/staged2" "$out/ipc_alltoall_2"
  printf '\nreduction kernels vs cuMemcpyDtoD (GB/s = 1e9 bytes moved / s)\n%s\n%s\n' \
    "   1048576 float32   sum        647.0      391.0      1.0     166%" \
    "  67108864 float32   sum       2786.0     2789.0      1.0     100%" > "$out/bench"
  summary
  echo
  echo "gpu_check: dry run done (the figures above come from sample tables, not from a GPU)"
  exit 0
fi

summary
say "done: $failures failed step(s)"
[ "$failures" = 0 ]
