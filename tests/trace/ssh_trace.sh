#!/bin/bash
# zcrun collects flight-recorder dumps from other hosts over ssh
# (docs/debugging.md, "Jobs across hosts"): hosts emulated by namespaces
# with sshd (tests/slurm/emuhosts.sh, cluster.sh); zcrun runs on "ctl" with
# --hostfile (n1 and n2, 2 ranks each) and no ZC_TRACE_DIR. Rank 3 (on n2)
# skips allreduce #6 (trace_scenario skip); the others time out there.
# zcrun must fetch every rank's dump from n1 and n2, print one verdict
# naming rank 3, sequence number 6 and the call, and leave no folder of its
# own behind on the hosts.
# Env (meson sets them): ZC_BUILD, ZC_SRC.
set -euo pipefail
slurm=$ZC_SRC/tests/slurm
. "$slurm/emuhosts.sh"
. "$slurm/cluster.sh"
scenario=$ZC_BUILD/tests/trace/trace_scenario
zcrun=$ZC_BUILD/launcher/zcrun
cluster_need sshd ssh ssh-keygen tar
cluster_init 2
cluster_start_sshd
d=$CLUSTER_DIR
printf 'n1 slots=2\nn2 slots=2\n' >"$d/hostfile"
remote_before=$(ls -d /tmp/zcrun-trace-*.remote 2>/dev/null || true)

rc=0
emu_exec ctl env ZC_SOCKET_IFNAME==eth0 ZC_TIMEOUT=4 TMPDIR="$d" -u ZC_TRACE_DIR \
  timeout 120 "$zcrun" --rsh "ssh -F $CLUSTER_SSH_CONFIG {host}" \
  -x ZC_SOCKET_IFNAME -x ZC_TIMEOUT --hostfile "$d/hostfile" "$scenario" skip >"$d/skip.out" 2>&1 || rc=$?
cat "$d/skip.out"
fail() { echo "FAIL: $*"; exit 1; }
[ $rc != 0 ] || fail "zcrun exited 0"
[ $rc != 124 ] || fail "zcrun did not end within 120 s"
grep -q "^zcrun: communicator 0 of job [0-9a-f]*: 4 ranks over tcp; dumps from 4" "$d/skip.out" ||
  fail "the diagnosis does not have the dumps of all 4 ranks"
grep -q "^zcrun: verdict: rank 3 never posted allreduce #6 (count=8, float32, sum); ranks 0, 1, 2 wait for it there" \
  "$d/skip.out" || fail "the verdict does not name rank 3 and allreduce #6"
grep -q "^zcrun:   rank 3 (pid [0-9]* on n2)" "$d/skip.out" || fail "rank 3's dump (on n2) is not in the diagnosis"
! grep -q "no flight-recorder dumps from host" "$d/skip.out" || fail "a host's dumps were missing"
# zcrun's folders: the local one (in TMPDIR) and the remote one are gone.
! ls -d "$d"/zcrun-trace-* 2>/dev/null || fail "zcrun left its local trace folder"
[ "$(ls -d /tmp/zcrun-trace-*.remote 2>/dev/null || true)" = "$remote_before" ] || fail "zcrun left a remote trace folder"
cluster_finish
