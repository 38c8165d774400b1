#!/bin/sh
# A job whose ranks are all on this host listens and connects on loopback
# only (issue 17): with ZC_SOCKET_IFNAME unset (the default picks the first
# network card), zcrun's store and the tcp transport must still use
# 127.0.0.1. While the job holds after zc_init, `ss` lists every TCP socket
# of zcrun and its ranks: listening (the store) and connected (the store
# clients and the tcp data connections, whose local ends show the address
# each rank's data port listened on). Then, with ZC_SOCKET_IFNAME set
# explicitly to a network card, the data connections use that card.
#   single_host_loopback.sh ZCRUN PROBE
set -eu
# The explicit case runs in a network namespace of its own (a veth pair made
# there), so no test socket ever listens on this machine's network card:
#   single_host_loopback.sh --explicit ZCRUN PROBE   (inside that namespace)
mode=default
if [ "${1:-}" = "--explicit" ]; then mode=explicit; shift; fi
zcrun=$1 probe=$2
command -v ss >/dev/null || { echo "SKIP: ss (iproute2) not installed"; exit 77; }
dir=$(mktemp -d)
trap 'touch "$dir/go"; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
card=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
[ -n "$card" ] || [ $mode = explicit ] || echo "note: no non-loopback IPv4 interface here; the default is loopback anyway"

# run_job NAME: runs a 3-rank tcp job, holds it after zc_init, writes the
# job's TCP sockets (local addresses) to $dir/NAME.sockets.
run_job() {
  name=$1
  rm -f "$dir/go"
  : >"$dir/$name.out"  # exists before the job starts writing it
  ZC_TRANSPORT=tcp ZC_DEBUG=info ZC_DEBUG_SUBSYS=tcp,bootstrap,launcher \
    "$zcrun" -np 3 --timeout 60 "$probe" init-wait "$dir/go" >"$dir/$name.out" 2>&1 &
  job=$!
  i=0
  while [ "$(grep -c 'ready rank [0-9]* pid' "$dir/$name.out" 2>/dev/null || true)" -lt 3 ]; do
    i=$((i + 1))
    if [ $i -gt 600 ] || ! kill -0 $job 2>/dev/null; then
      echo "FAIL: $name: the job did not reach zc_init's end:"; cat "$dir/$name.out"; exit 1
    fi
    sleep 0.1
  done
  pids="$job $(sed -n 's/.*ready rank [0-9]* pid \([0-9]*\)$/\1/p' "$dir/$name.out" | tr '\n' ' ')"
  : >"$dir/$name.sockets"
  for p in $pids; do
    ss -Htanp 2>/dev/null | grep "pid=$p," | awk -v p="$p" '{print p, $1, $4, $5}' >>"$dir/$name.sockets"
  done
  touch "$dir/go"
  wait $job || { echo "FAIL: $name: the job failed:"; cat "$dir/$name.out"; exit 1; }
  echo "--- $name: TCP sockets of zcrun and its ranks (pid state local peer)"
  cat "$dir/$name.sockets"
  grep -q LISTEN "$dir/$name.sockets" || { echo "FAIL: $name: the store's listening socket was not seen"; exit 1; }
  [ "$(grep -c ESTAB "$dir/$name.sockets")" -ge 6 ] || { echo "FAIL: $name: too few connections seen"; exit 1; }
}

if [ $mode = explicit ]; then
  # Inside the private namespace: zcv0 (10.251.0.1) is the only card.
  export ZC_SOCKET_IFNAME="=zcv0"
  run_job explicit
  grep -q "listening on 10.251.0.1:" "$dir/explicit.out" || { echo "FAIL: explicit ZC_SOCKET_IFNAME=$ZC_SOCKET_IFNAME was not used"; cat "$dir/explicit.out"; exit 1; }
  echo "OK: an explicit ZC_SOCKET_IFNAME=$ZC_SOCKET_IFNAME still wins (data port on 10.251.0.1, in the test's own network namespace)"
  exit 0
fi

run_job default
if awk '$3 !~ /^127\.0\.0\.1:/ || ($2 != "LISTEN" && $4 !~ /^127\.0\.0\.1:/)' "$dir/default.sockets" | grep .; then
  echo "FAIL: the single-host job used the address(es) above, not loopback only"; exit 1
fi
grep -q "listening on 127.0.0.1:" "$dir/default.out" || { echo "FAIL: no tcp 'listening on 127.0.0.1' line"; cat "$dir/default.out"; exit 1; }
echo "OK: default ZC_SOCKET_IFNAME: every socket of the job is on 127.0.0.1"

if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
  unshare -n sh -c 'ip link set lo up && ip link add zcv0 type veth peer name zcv1 &&
                    ip addr add 10.251.0.1/24 dev zcv0 && ip link set zcv1 up && ip link set zcv0 up &&
                    exec sh "$0" --explicit "$1" "$2"' "$0" "$zcrun" "$probe" || exit 1
else
  echo "note: the explicit ZC_SOCKET_IFNAME case needs root for a private network namespace: not run"
fi
exit 0
