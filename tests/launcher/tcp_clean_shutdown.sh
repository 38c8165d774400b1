#!/bin/sh
# A clean tcp job prints nothing at the default log level: no WARN or ERROR
# line, in particular none for a peer's last credit arriving after the
# region it targets was freed at shutdown. Several runs: that race is timing.
#   tcp_clean_shutdown.sh ZCRUN PROGRAM
set -eu
zcrun=$1 prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
export ZC_TRANSPORT=tcp ZC_SOCKET_IFNAME=lo
unset ZC_DEBUG ZC_DEBUG_SUBSYS || true
fail=0
run=0
for np in 2 3 3 2 3 3 2 3 3 2 3 3 2 3 3 2 3 3 2 3; do
  run=$((run + 1))
  if ! "$zcrun" -np "$np" --timeout 90 "$prog" >"$out" 2>&1; then
    echo "FAIL: run $run (np $np) exited non-zero:"; cat "$out"; exit 1
  fi
  grep -q "c_abi_program: $np ranks OK" "$out" || { echo "FAIL: run $run: no OK line"; cat "$out"; exit 1; }
  if grep -E "WARN|ERROR" "$out"; then
    echo "FAIL: run $run (np $np) printed the WARN/ERROR line(s) above"; fail=1
  fi
done
[ $fail = 0 ] && echo "OK: $run tcp jobs, no WARN or ERROR line"
exit $fail
