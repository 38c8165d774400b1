#!/bin/bash
# zcomm under a real Slurm cluster (Debian's slurmctld/slurmd/munge) whose
# nodes are emulated hosts: srun --mpi=pmix starts tests/slurm/cluster_job
# on 2 nodes x 2 ranks and on 3 nodes x 1. Each rank checks rank, size and
# locality from PMIx against Slurm's variables and the host names, every
# collective, and that it talks shared memory to the ranks on its host and
# TCP (eth0, ZC_SOCKET_IFNAME==eth0) to the others (cluster_job.c). Slurm's
# own view is checked too: which host each rank ran on.
# Env (meson sets them): ZC_BUILD, ZC_SRC, ZC_HAVE_PMIX.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/emuhosts.sh"
. "$here/cluster.sh"
[ "${ZC_HAVE_PMIX:-1}" = 1 ] || cluster_skip "zcomm was built without PMIx"
job=$ZC_BUILD/tests/slurm/cluster_job
cluster_need slurmctld slurmd srun munged
cluster_init 3
cluster_start_slurm
out=$CLUSTER_DIR/out

# srun NODES PER-NODE: the job; checks every rank's line and its host.
run_shape() {
  local nodes=$1 per=$2 n=$(($1 * $2)) r host
  echo "--- srun --mpi=pmix -N$nodes --ntasks-per-node=$per ($n ranks)"
  if ! login env ZC_SOCKET_IFNAME==eth0 ZC_TIMEOUT=60 timeout 180 \
      srun --mpi=pmix -N"$nodes" --ntasks-per-node="$per" -l "$job" >"$out" 2>&1; then
    echo "FAIL: the job failed:"; cat "$out"; cluster_logs; exit 1
  fi
  cat "$out"
  for r in $(seq 0 $((n - 1))); do
    host=n$((r / per + 1))
    grep -q "^ *$r: rank $r of $n on $host: local rank $((r % per)) of $per;" "$out" ||
      { echo "FAIL: no line of rank $r on $host"; exit 1; }
  done
  grep -q "^ *0: cluster_job: $n ranks: every collective verified" "$out" ||
    { echo "FAIL: rank 0 did not report success"; exit 1; }
}

run_shape 2 2
run_shape 3 1
cluster_finish
