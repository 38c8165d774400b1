#!/bin/bash
# Wall time of a 4-rank job from the launcher's start to the first
# allreduce done (rank 0's clock after zc_allreduce returns; the hosts share
# this machine's clock), for each way of starting zcomm (docs/launcher.md,
# "Start-up time"):
#   srun 2x2      srun --mpi=pmix -N2 --ntasks-per-node=2 on the emulated
#                 Slurm cluster of tests/slurm (PMIx bootstrap)
#   srun 1x4      srun --mpi=pmix -N1 -n4 (one node)
#   zcrun ssh 2x2 zcrun --hostfile (2 hosts x 2) over ssh to the same hosts
#   zcrun local   zcrun -np 4 on this machine
#   mpirun local  Open MPI's mpirun -np 4 on this machine (PMIx bootstrap)
# The program is tests/slurm/cluster_job --first (zc_init, one allreduce,
# zc_finalize). REPS runs each, alternating; prints min/median/max in s.
#   sudo scripts/launch_time.sh [BUILD_DIR]      env: REPS=5
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
reps=${REPS:-5}
src=$(cd "$(dirname "$0")/.." && pwd)
job=$build/tests/slurm/cluster_job
. "$src/tests/slurm/emuhosts.sh"
. "$src/tests/slurm/cluster.sh"
[ -x "$job" ] || { echo "missing $job (ninja -C $build)"; exit 1; }
cluster_init 2
cluster_start_slurm
cluster_start_sshd
d=$CLUSTER_DIR
printf 'n1 slots=2\nn2 slots=2\n' >"$d/hostfile"
mpirun=$(command -v mpirun.openmpi || command -v mpirun || true)

# one NAME HOST CMD...: runs CMD on HOST, prints seconds to the first allreduce.
one() {
  local name=$1 host=$2; shift 2
  local t0 t1
  t0=$(date +%s.%N)
  if ! emu_exec "$host" env ZC_SOCKET_IFNAME==eth0 ZC_TIMEOUT=60 timeout 120 "$@" >"$d/one.out" 2>&1; then
    echo "FAIL: $name:" >&2; cat "$d/one.out" >&2; exit 1
  fi
  t1=$(sed -n 's/.*first allreduce done at \([0-9.]*\) .*/\1/p' "$d/one.out")
  [ -n "$t1" ] || { echo "FAIL: $name: no time:" >&2; cat "$d/one.out" >&2; exit 1; }
  awk -v a="$t1" -v b="$t0" 'BEGIN {printf "%.6f\n", a - b}'
}

declare -A times
names=("srun 2x2" "srun 1x4" "zcrun ssh 2x2" "zcrun local" "mpirun local")
for rep in $(seq 1 "$reps"); do
  times["srun 2x2"]+=" $(one "srun 2x2" ctl srun --mpi=pmix -N2 --ntasks-per-node=2 "$job" --first)"
  times["srun 1x4"]+=" $(one "srun 1x4" ctl srun --mpi=pmix -N1 -n4 "$job" --first)"
  times["zcrun ssh 2x2"]+=" $(one "zcrun ssh 2x2" ctl "$build/launcher/zcrun" --hostfile "$d/hostfile" \
      --rsh "ssh -F $CLUSTER_SSH_CONFIG {host}" -x ZC_SOCKET_IFNAME "$job" --first)"
  times["zcrun local"]+=" $(one "zcrun local" n1 env -u ZC_SOCKET_IFNAME "$build/launcher/zcrun" -np 4 "$job" --first)"
  if [ -n "$mpirun" ]; then
    times["mpirun local"]+=" $(one "mpirun local" n1 "$mpirun" --allow-run-as-root --oversubscribe -np 4 "$job" --first)"
  fi
done
echo "load: $(uptime)"
printf '%-14s %8s %8s %8s  (s, %d runs)\n' launcher min median max "$reps"
for n in "${names[@]}"; do
  [ -n "${times[$n]:-}" ] || continue
  echo ${times[$n]} | tr ' ' '\n' | sort -g | awk -v n="$n" '{v[NR]=$1} END {printf "%-14s %8.3f %8.3f %8.3f\n", n, v[1], v[int((NR+1)/2)], v[NR]}'
done
