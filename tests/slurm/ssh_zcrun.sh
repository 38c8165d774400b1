#!/bin/bash
# zcrun across emulated hosts over real ssh: sshd (Debian's openssh-server)
# runs on each host with a host key, an authorized key and a configuration
# the test makes in its temporary directory; zcrun runs on the login host
# "ctl" with --hostfile and --rsh "ssh -F <that config> {host}". The same
# jobs as under Slurm (slurm_collectives.sh, slurm_torch.sh, slurm_jobs.sh):
#   - cluster_job on 2 hosts x 2 ranks (hostfile) and 3 hosts x 1 (-H);
#   - torch_job.py env (env:// from zcrun's variables; MASTER_ADDR n1) and
#     hvd (Horovod's API through zcrun's store), 2 x 2;
#   - a remote rank killed with SIGKILL ends the job, zcrun naming the rank.
# Env (meson sets them): ZC_BUILD, ZC_SRC.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/emuhosts.sh"
. "$here/cluster.sh"
job=$ZC_BUILD/tests/slurm/cluster_job
zcrun=$ZC_BUILD/launcher/zcrun
cluster_need sshd ssh ssh-keygen
cluster_init 3
cluster_start_sshd
d=$CLUSTER_DIR
printf '# host  slots\nn1 slots=2\nn2 slots=2\n' >"$d/hostfile"

# zc NAME ZCRUN-ARGS...: zcrun on ctl over ssh; output in $d/NAME.out.
zc() {
  local name=$1; shift
  emu_exec ctl env ZC_SOCKET_IFNAME==eth0 ZC_TIMEOUT=60 PYTHONPATH="$ZC_BUILD/python" \
    timeout 240 "$zcrun" --rsh "ssh -F $CLUSTER_SSH_CONFIG {host}" \
    -x ZC_SOCKET_IFNAME -x ZC_TIMEOUT -x PYTHONPATH "$@" >"$d/$name.out" 2>&1
}

# expect_ranks NAME N PER PATTERN: every rank's line, on host n(r/PER+1).
expect_ranks() {
  local name=$1 n=$2 per=$3 pattern=$4 r
  for r in $(seq 0 $((n - 1))); do
    grep -q "^\[$r\] rank $r of $n on n$((r / per + 1))$(printf "$pattern" $((r % per)) "$per")" "$d/$name.out" ||
      { echo "FAIL: $name: no line of rank $r on n$((r / per + 1))"; exit 1; }
  done
}

run_ok() {
  local name=$1; shift
  echo "--- zcrun $*"
  zc "$name" "$@" || { echo "FAIL: $name: the job failed:"; cat "$d/$name.out"; exit 1; }
  cat "$d/$name.out"
}

run_ok hostfile --hostfile "$d/hostfile" "$job"
expect_ranks hostfile 4 2 ": local rank %d of %d;"
grep -q "^\[0\] cluster_job: 4 ranks: every collective verified" "$d/hostfile.out" || { echo "FAIL: no success line"; exit 1; }

run_ok hosts -H n1,n2,n3 "$job"
expect_ranks hosts 3 1 ": local rank %d of %d;"
grep -q "^\[0\] cluster_job: 3 ranks: every collective verified" "$d/hosts.out" || { echo "FAIL: no success line"; exit 1; }

if [ -e "$ZC_BUILD/python/zcomm/torch/__init__.py" ]; then
  run_ok env --hostfile "$d/hostfile" /usr/bin/python3 "$here/torch_job.py" env
  expect_ranks env 4 2 " (env from ZC_RANK): MASTER_ADDR=n1 MASTER_PORT=[0-9]*$"
  grep -q "^\[0\] torch_job env: 4 ranks OK" "$d/env.out" || { echo "FAIL: no success line"; exit 1; }

  run_ok hvd --hostfile "$d/hostfile" /usr/bin/python3 "$here/torch_job.py" hvd
  expect_ranks hvd 4 2 " (hvd from ZC_RANK): local rank %d of %d$"
  grep -q "^\[0\] torch_job hvd: 4 ranks OK" "$d/hvd.out" || { echo "FAIL: no success line"; exit 1; }
else
  echo "note: zcomm.torch not built: the torch jobs are left out"
fi

echo "--- kill -9 of rank 3 (on n2)"
zc kill --hostfile "$d/hostfile" "$job" --loop 60 &
zpid=$!
end=$((SECONDS + 60))
until [ "$(grep -c "ready rank" "$d/kill.out" 2>/dev/null)" = 4 ]; do
  if [ $SECONDS -ge $end ] || ! kill -0 $zpid 2>/dev/null; then
    echo "FAIL: the ranks did not start:"; cat "$d/kill.out"; exit 1
  fi
  sleep 0.1
done
pids=$(sed -n 's/^\[[0-9]*\] ready rank [0-9]* pid \([0-9]*\) host .*/\1/p' "$d/kill.out")
kill -9 "$(sed -n 's/^\[3\] ready rank 3 pid \([0-9]*\) host .*/\1/p' "$d/kill.out")"
start=$SECONDS rc=0
wait $zpid || rc=$?
echo "zcrun exited with $rc after $((SECONDS - start)) s:"
cat "$d/kill.out"
[ $rc != 0 ] || { echo "FAIL: zcrun exited 0"; exit 1; }
grep -q "^zcrun: rank 3 (pid [0-9]* on host n2)" "$d/kill.out" || { echo "FAIL: zcrun did not name rank 3 on n2"; exit 1; }
end=$((SECONDS + 20))
for p in $pids; do
  while kill -0 "$p" 2>/dev/null; do
    [ $SECONDS -lt $end ] || { echo "FAIL: rank pid $p still runs after zcrun ended"; exit 1; }
    sleep 0.1
  done
done
cluster_finish
