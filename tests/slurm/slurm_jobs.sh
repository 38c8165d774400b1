#!/bin/bash
# Batch jobs and failures under a real Slurm cluster on emulated hosts:
#   - sbatch --wait examples/slurm_job.sbatch (2 nodes x 2 ranks) runs
#     cluster_job; the job's output file has every rank's checks;
#   - a task killed with SIGKILL (a crash) ends the job: srun exits
#     non-zero, names the task and the signal, and no rank is left running;
#   - a whole node killed (every process in its namespaces: slurmd,
#     slurmstepd, the ranks) ends the job: the survivors name the lost peer;
#     srun ends the step at once, or, at the latest, when slurmctld declares
#     the node down (SlurmdTimeout=20 in cluster.sh).
# Env (meson sets them): ZC_BUILD, ZC_SRC, ZC_HAVE_PMIX.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/emuhosts.sh"
. "$here/cluster.sh"
[ "${ZC_HAVE_PMIX:-1}" = 1 ] || cluster_skip "zcomm was built without PMIx"
job=$ZC_BUILD/tests/slurm/cluster_job
cluster_need slurmctld slurmd srun sbatch munged
cluster_init 2
cluster_start_slurm
d=$CLUSTER_DIR

echo "--- sbatch --wait examples/slurm_job.sbatch"
if ! login env ZC_TIMEOUT=60 timeout 180 sbatch --wait -o "$d/batch.out" \
    "$ZC_SRC/examples/slurm_job.sbatch" "$job" >"$d/sbatch.log" 2>&1; then
  echo "FAIL: the batch job failed:"; cat "$d/sbatch.log" "$d/batch.out" 2>/dev/null; cluster_logs; exit 1
fi
cat "$d/sbatch.log" "$d/batch.out"
grep -q "^job [0-9]* on n\[1-2\]: 4 ranks" "$d/batch.out" || { echo "FAIL: no job line"; exit 1; }
grep -q "cluster_job: 4 ranks: every collective verified" "$d/batch.out" || { echo "FAIL: no success line"; exit 1; }
[ "$(grep -c "^rank [0-3] of 4 on n[12]: local rank [01] of 2;" "$d/batch.out")" = 4 ] ||
  { echo "FAIL: not every rank reported"; exit 1; }

# start_looping_job NAME: a 2x2 job of allreduces (60 s at most) in the
# background; returns when every rank has printed its pid.
start_looping_job() {
  local name=$1 end=$((SECONDS + 60))
  : >"$d/$name.out"
  login env ZC_SOCKET_IFNAME==eth0 ZC_TIMEOUT=60 timeout 120 \
    srun --mpi=pmix --kill-on-bad-exit=1 -N2 --ntasks-per-node=2 -l "$job" --loop 60 >"$d/$name.out" 2>&1 &
  SRUN_PID=$!
  until [ "$(grep -c "ready rank" "$d/$name.out")" = 4 ]; do
    if [ $SECONDS -ge $end ] || ! kill -0 $SRUN_PID 2>/dev/null; then
      echo "FAIL: $name: the ranks did not start:"; cat "$d/$name.out"; cluster_logs; exit 1
    fi
    sleep 0.1
  done
}

# wait_job_end NAME SECONDS: srun must end, non-zero, within SECONDS.
wait_job_end() {
  local name=$1 secs=$2 start=$SECONDS rc=0
  while kill -0 $SRUN_PID 2>/dev/null; do
    if [ $((SECONDS - start)) -ge "$secs" ]; then
      echo "FAIL: $name: the job still runs $secs s after the kill:"; cat "$d/$name.out"; exit 1
    fi
    sleep 0.1
  done
  wait $SRUN_PID || rc=$?
  echo "--- $name: srun exited with $rc after $((SECONDS - start)) s:"
  cat "$d/$name.out"
  [ $rc != 0 ] || { echo "FAIL: $name: srun exited 0"; exit 1; }
}

# no_rank_left PIDS: none of the job's ranks still runs.
no_rank_left() {
  local p end=$((SECONDS + 20))
  for p in "$@"; do
    while kill -0 "$p" 2>/dev/null; do
      [ $SECONDS -lt $end ] || { echo "FAIL: rank pid $p still runs after the job ended"; exit 1; }
      sleep 0.1
    done
  done
}

pids_of() { sed -n 's/^ *[0-9]*: ready rank [0-9]* pid \([0-9]*\) host .*/\1/p' "$d/$1.out"; }
pid_of_rank() { sed -n "s/^ *[0-9]*: ready rank $2 pid \([0-9]*\) host .*/\1/p" "$d/$1.out"; }

echo "--- kill -9 of task 3 (on n2)"
start_looping_job task
kill -9 "$(pid_of_rank task 3)"
wait_job_end task 30
grep -q "srun: error: n2: task 3: Killed" "$d/task.out" ||
  { echo "FAIL: srun did not name task 3 and the signal"; exit 1; }
no_rank_left $(pids_of task)

echo "--- node n2 killed (slurmd, slurmstepd and its ranks)"
start_looping_job node
emu_kill_host n2
wait_job_end node 90
grep -Eq "rank [01]: .*(peer|rank) [23].*(lost|closed|died)|lost.*(peer|rank) [23]" "$d/node.out" ||
  { echo "FAIL: no survivor named a lost peer on n2"; exit 1; }
no_rank_left $(pids_of node)
cluster_finish
