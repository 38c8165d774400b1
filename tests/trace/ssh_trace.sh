#!/bin/bash
# zcrun collects flight-recorder dumps from other hosts over ssh
# (docs/debugging.md, "Jobs across hosts"): hosts emulated by namespaces
# with sshd (tests/slurm/emuhosts.sh, cluster.sh); zcrun runs on "ctl" with
# --hostfile (n1 and n2, 2 ranks each) and no ZC_TRACE_DIR. Rank 3 (on n2)
# skips allreduce #6 (trace_scenario skip); the others time out there.
#   skip: zcrun fetches every rank's dump from n1 and n2, prints one verdict
#     naming rank 3, sequence number 6 and the call, and leaves no folder of
#     its own behind.
#   unreachable: n2 never answers zcrun's request for dumps (its --rsh
#     wrapper hangs there, as ssh does when a host is gone): zcrun names n2
#     after 15 s, kills that command, and still gives a verdict from the
#     dumps it has. (The emulated hosts share /tmp: n1's folder also holds
#     the dumps that n2's ranks wrote by themselves on their timeout.)
#   refused: n2 refuses the connection that asks for its dumps (the --rsh
#     wrapper sends that one command to port 1 of n2, where nothing
#     listens: n2's kernel refuses it, ssh exits 255): zcrun names n2 and
#     ssh's "Connection refused", and still gives a verdict from the dumps
#     it has.
# Env (meson sets them): ZC_BUILD, ZC_SRC.
set -euo pipefail
slurm=$ZC_SRC/tests/slurm
. "$slurm/emuhosts.sh"
. "$slurm/cluster.sh"
scenario=$ZC_BUILD/tests/trace/trace_scenario
zcrun=$ZC_BUILD/launcher/zcrun
cluster_need sshd ssh ssh-keygen tar
# A sanitizer run preloads its runtime for the Python interpreters that
# load the instrumented module (docs/testing.md). Here that is only the
# analyzer zcrun starts: sshd, ssh and the --rsh wrappers run without it.
preload=${LD_PRELOAD:-}
unset LD_PRELOAD
cluster_init 2
if [ -n "$preload" ]; then
  printf '#!/bin/sh\nLD_PRELOAD=%s exec /usr/bin/python3 "$@"\n' "$preload" >"$CLUSTER_DIR/analyzer_python"
  chmod +x "$CLUSTER_DIR/analyzer_python"
  export ZCRUN_PYTHON=$CLUSTER_DIR/analyzer_python
fi
cluster_start_sshd
d=$CLUSTER_DIR
printf 'n1 slots=2\nn2 slots=2\n' >"$d/hostfile"
remote_before=$(ls -d /tmp/zcrun-trace-*.remote 2>/dev/null || true)

fail() { echo "FAIL: $*"; exit 1; }

# A sanitizer run's options reach the ranks on the emulated hosts too (sshd
# starts them with an environment of its own).
forward=(-x ZC_SOCKET_IFNAME -x ZC_TIMEOUT)
for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS; do
  [ -z "${!v:-}" ] || forward+=(-x "$v")
done

# run NAME RSH: the skip job; its output in $d/NAME.out.
run() {
  echo "--- $1"
  local rc=0
  emu_exec ctl env -u ZC_TRACE_DIR ZC_SOCKET_IFNAME==eth0 ZC_TIMEOUT=4 TMPDIR="$d" \
    timeout 120 "$zcrun" --rsh "$2" "${forward[@]}" \
    --hostfile "$d/hostfile" "$scenario" skip >"$d/$1.out" 2>&1 || rc=$?
  cat "$d/$1.out"
  # Under a sanitizer: a report by any rank or by zcrun fails the test, even
  # where the rank was meant to fail anyway.
  ! grep -qE "ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error: " "$d/$1.out" ||
    fail "$1: a sanitizer reported"
  [ $rc != 0 ] || fail "$1: zcrun exited 0"
  [ $rc != 124 ] || fail "$1: zcrun did not end within 120 s"
  # zcrun's folders: the local one (in TMPDIR) and the remote one are gone.
  ! ls -d "$d"/zcrun-trace-* 2>/dev/null || fail "$1: zcrun left its local trace folder"
  [ "$(ls -d /tmp/zcrun-trace-*.remote 2>/dev/null || true)" = "$remote_before" ] ||
    fail "$1: zcrun left a remote trace folder"
}

run skip "ssh -F $CLUSTER_SSH_CONFIG {host}"
grep -q "^zcrun: communicator 0 of job [0-9a-f]*: 4 ranks over [a-z]*; dumps from 4" "$d/skip.out" ||
  fail "skip: the diagnosis does not have the dumps of all 4 ranks"
grep -q "^zcrun: verdict: rank 3 never posted allreduce #6 (count=8, float32, sum); ranks 0, 1, 2 wait for it there" \
  "$d/skip.out" || fail "skip: the verdict does not name rank 3 and allreduce #6"
grep -q "^zcrun:   rank 3 (pid [0-9]* on n2)" "$d/skip.out" || fail "skip: rank 3's dump (on n2) is not in the diagnosis"
! grep -q "no flight-recorder dumps from host" "$d/skip.out" || fail "skip: a host's dumps were missing"

# n2 never answers the request for dumps (a sleep of a unique length,
# looked for below).
printf '#!/bin/sh\ncase "$*" in *.zctrace-p*) [ "$1" = n2 ] && exec sleep 117.5 ;; esac\nexec ssh -F %s "$@"\n' \
  "$CLUSTER_SSH_CONFIG" >"$d/hangssh"
chmod +x "$d/hangssh"
run unreachable "$d/hangssh {host}"
grep -q "^zcrun: no flight-recorder dumps from host n2: no answer within 15 s" "$d/unreachable.out" ||
  fail "unreachable: zcrun did not name host n2"
! grep -q "no flight-recorder dumps from host n1" "$d/unreachable.out" || fail "unreachable: zcrun named n1"
grep -q "^zcrun: verdict: rank 3 wrote no dump (host n2 sent no dumps: no answer within 15 s); ranks 0, 1, 2 wait in allreduce #6" \
  "$d/unreachable.out" || fail "unreachable: the verdict does not name rank 3 and host n2"
! pgrep -fx "sleep 117.5" >/dev/null || fail "unreachable: zcrun left n2's hung command running"
# n2 refuses the connection that asks for its dumps (a real refusal: port
# 1 of n2 has no listener); every other command goes to its sshd.
printf '#!/bin/sh\ncase "$*" in *.zctrace-p*) [ "$1" = n2 ] && exec ssh -F %s -p 1 "$@" ;; esac\nexec ssh -F %s "$@"\n' \
  "$CLUSTER_SSH_CONFIG" "$CLUSTER_SSH_CONFIG" >"$d/refusessh"
chmod +x "$d/refusessh"
run refused "$d/refusessh {host}"
grep -q "^zcrun: no flight-recorder dumps from host n2: ssh failed (exit code 255): ssh: connect to host .* port 1: Connection refused$" \
  "$d/refused.out" || fail "refused: zcrun did not name host n2 and the refusal"
! grep -q "no flight-recorder dumps from host n1" "$d/refused.out" || fail "refused: zcrun named n1"
grep -q "^zcrun: verdict: rank 3 wrote no dump (host n2 sent no dumps: ssh failed (exit code 255): .*Connection refused); ranks 0, 1, 2 wait in allreduce #6" \
  "$d/refused.out" || fail "refused: the verdict does not name rank 3, host n2 and the refusal"
cluster_finish
