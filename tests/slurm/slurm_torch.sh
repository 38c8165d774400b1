#!/bin/bash
# torch.distributed and Horovod's API under a real Slurm cluster on emulated
# hosts, 2 nodes x 2 tasks (tests/slurm/torch_job.py):
#   - srun torch_job.py env: init_method="env://" with no variable set by
#     hand; `import zcomm.torch` takes RANK, WORLD_SIZE, MASTER_ADDR (the
#     first node, n1) and MASTER_PORT from Slurm's variables;
#   - srun --mpi=pmix torch_job.py hvd: hvd.init() through PMIx.
# Env (meson sets them): ZC_BUILD, ZC_SRC, ZC_HAVE_PMIX.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/emuhosts.sh"
. "$here/cluster.sh"
[ "${ZC_HAVE_PMIX:-1}" = 1 ] || cluster_skip "zcomm was built without PMIx"
[ -e "$ZC_BUILD/python/zcomm/torch/__init__.py" ] || cluster_skip "zcomm.torch not built (needs libtorch-dev)"
cluster_need slurmctld slurmd srun munged
cluster_init 2
cluster_start_slurm
d=$CLUSTER_DIR

# run MODE SRUN-OPTIONS...
run() {
  local mode=$1; shift
  echo "--- srun $* -N2 --ntasks-per-node=2 torch_job.py $mode"
  if ! login env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT PYTHONPATH="$ZC_BUILD/python" \
      ZC_SOCKET_IFNAME==eth0 ZC_TIMEOUT=60 timeout 240 \
      srun "$@" --kill-on-bad-exit=1 -N2 --ntasks-per-node=2 -l /usr/bin/python3 "$here/torch_job.py" "$mode" \
      >"$d/$mode.out" 2>&1; then
    echo "FAIL: the job failed:"; cat "$d/$mode.out"; cluster_logs; exit 1
  fi
  cat "$d/$mode.out"
  grep -q "^ *0: torch_job $mode: 4 ranks OK" "$d/$mode.out" || { echo "FAIL: rank 0 did not report success"; exit 1; }
  local r
  for r in 0 1 2 3; do
    grep -q "^ *$r: rank $r of 4 on n$((r / 2 + 1)) ($mode from SLURM_PROCID)" "$d/$mode.out" ||
      { echo "FAIL: no line of rank $r on n$((r / 2 + 1))"; exit 1; }
  done
}

run env
grep -q "^ *3: .*MASTER_ADDR=n1 MASTER_PORT=[0-9]*$" "$d/env.out" || { echo "FAIL: MASTER_ADDR is not n1"; exit 1; }
run hvd --mpi=pmix
grep -q "^ *3: .*local rank 1 of 2$" "$d/hvd.out" || { echo "FAIL: hvd's local rank/size"; exit 1; }
cluster_finish
