#!/bin/sh
# ZC_SOCKET_IFNAME (NCCL_SOCKET_IFNAME's grammar) chooses the address the
# tcp transport binds and advertises, on a multi-homed host: a network
# namespace of the test's own (gone when the test ends) with
#   zcnet0  10.251.1.1   zcnet10 10.251.2.1   zcoth0 10.251.3.1   (up)
#   zcdown0 10.251.4.1 (down), and the veth peers zp0..zp3 (no address)
# For each value a 3-rank tcp job under zcrun holds after zc_init; the
# tcp INFO line "listening on ADDR:PORT (IFNAME)" (what each rank
# advertises) and the local and peer addresses of every data connection of
# the ranks (ss) must be the expected interface's. A value that matches
# nothing fails every rank's zc_init with a message naming the interfaces.
#   interface_selection.sh ZCRUN PROBE
set -eu
if [ "${1:-}" != "--inside" ]; then
  command -v ss >/dev/null || { echo "SKIP: ss (iproute2) not installed"; exit 77; }
  if [ "$(id -u)" != 0 ] || ! unshare -n true 2>/dev/null; then
    echo "SKIP: needs root for a private network namespace (unshare -n)"; exit 77
  fi
  exec unshare -n sh -c '
    set -e
    ip link set lo up
    n=0
    for spec in zcnet0:10.251.1.1:up zcnet10:10.251.2.1:up zcoth0:10.251.3.1:up zcdown0:10.251.4.1:down; do
      name=${spec%%:*}; rest=${spec#*:}; addr=${rest%%:*}; state=${rest#*:}
      ip link add "$name" type veth peer name "zp$n"
      ip addr add "$addr/24" dev "$name"
      ip link set "zp$n" up
      [ "$state" = down ] || ip link set "$name" up
      n=$((n + 1))
    done
    exec sh "$0" --inside "$1" "$2"' "$0" "$1" "$2"
fi
shift
zcrun=$1 probe=$2
dir=$(mktemp -d)
trap 'touch "$dir/go"; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
echo "--- interfaces in the test's namespace"
ip -o -4 addr show | awk '{print $2, $4}'

# start_job NAME VALUE: a 3-rank tcp job with ZC_SOCKET_IFNAME=VALUE, in
# the background; its output goes to $dir/NAME.out.
start_job() {
  rm -f "$dir/go"
  : >"$dir/$1.out"
  ZC_SOCKET_IFNAME=$2 ZC_TRANSPORT=tcp ZC_DEBUG=info ZC_DEBUG_SUBSYS=tcp,common \
    "$zcrun" -np 3 --timeout 60 "$probe" init-wait "$dir/go" >"$dir/$1.out" 2>&1 &
  job=$!
}

fail() { echo "FAIL: $1"; cat "$dir/$2.out"; exit 1; }

# expect_address NAME VALUE IFNAME IP: the job's tcp ports are on IFNAME's IP.
expect_address() {
  name=$1 value=$2 ifname=$3 ip=$4
  start_job "$name" "$value"
  i=0
  while [ "$(grep -c 'ready rank [0-9]* pid' "$dir/$name.out" || true)" -lt 3 ]; do
    i=$((i + 1))
    { [ $i -le 600 ] && kill -0 $job 2>/dev/null; } || fail "$name: the job did not reach zc_init's end" "$name"
    sleep 0.1
  done
  pids=$(sed -n 's/.*ready rank [0-9]* pid \([0-9]*\)$/\1/p' "$dir/$name.out")
  : >"$dir/$name.sockets"
  for p in $pids; do
    ss -Htanp state established 2>/dev/null | grep "pid=$p," | awk '{print $3, $4}' >>"$dir/$name.sockets"
  done
  touch "$dir/go"
  wait $job || fail "$name: the job failed" "$name"
  # Data connections: those not to or from zcrun's store (127.0.0.1).
  grep -v '127\.0\.0\.1:' "$dir/$name.sockets" >"$dir/$name.data" || true
  [ "$(wc -l <"$dir/$name.data")" -ge 6 ] || fail "$name: too few tcp data connections seen: $(cat "$dir/$name.sockets")" "$name"
  if awk -v ip="$ip" '{split($1, l, ":"); split($2, r, ":"); if (l[1] != ip || r[1] != ip) print}' "$dir/$name.data" | grep .; then
    fail "$name: ZC_SOCKET_IFNAME='$value': the connections above are not on $ifname ($ip)" "$name"
  fi
  [ "$(grep -c "listening on $ip:[0-9]* ($ifname)" "$dir/$name.out")" = 3 ] ||
    fail "$name: not every rank advertised $ip ($ifname)" "$name"
  grep -q "interface $ifname, address $ip (ZC_SOCKET_IFNAME='$value')" "$dir/$name.out" ||
    fail "$name: no INFO line naming the chosen interface" "$name"
  echo "OK: ZC_SOCKET_IFNAME='$value': $ifname $ip ($(wc -l <"$dir/$name.data") data connections, all on $ip)"
}

# expect_error NAME VALUE: every rank's zc_init fails, naming the value
# and the interfaces there are.
expect_error() {
  name=$1 value=$2
  start_job "$name" "$value"
  if wait $job; then fail "$name: ZC_SOCKET_IFNAME='$value' matched something" "$name"; fi
  for want in "ZC_SOCKET_IFNAME='$value'" "lo 127.0.0.1" "zcnet0 10.251.1.1" "zcnet10 10.251.2.1" \
              "zcoth0 10.251.3.1" "zcdown0 10.251.4.1 (down)" "zp0 (no IPv4 address)"; do
    grep -qF "$want" "$dir/$name.out" || fail "$name: the error does not say '$want'" "$name"
  done
  echo "OK: ZC_SOCKET_IFNAME='$value' fails: $(grep -m1 -o "ZC_SOCKET_IFNAME='$value'.*" "$dir/$name.out")"
}

expect_address prefix       zcnet         zcnet0  10.251.1.1
expect_address prefix_long  zcnet1        zcnet10 10.251.2.1
expect_address prefix_list  zcoth,zcnet1  zcnet10 10.251.2.1  # the system's order, not the value's
expect_address exact        =zcnet10      zcnet10 10.251.2.1
expect_address exclude      ^lo,zcnet     zcoth0  10.251.3.1
expect_address exclude_exact ^=lo,zcnet0  zcnet10 10.251.2.1
expect_error   exact_none   =zcnet1
expect_error   prefix_none  nosuch
expect_error   down_only    zcdown
exit 0
