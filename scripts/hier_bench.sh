#!/bin/bash
# Hierarchical allreduce benchmark on emulated hosts (docs/PERFORMANCE.md,
# "Hierarchical allreduce"). Each "host" is a network namespace plus a UTS
# namespace of its own (so the bootstrap sees a separate host), with 2 ranks,
# linked to a hub namespace's bridge by a veth pair throttled on both ends
# with tbf (RATE, default 5gbit): a host's egress and ingress are limited as
# a NIC's would be, so the network, not loopback, is the bottleneck.
# For 2 and 3 hosts it runs perf/zc_coll allreduce (float32 sum, 1 MiB ..
# 64 MiB) with ZC_ALGO=ring, hier and auto, and gloo_allreduce (gloo's ring
# allreduce), REPS rounds with the variants alternating, and prints per size
# the min/median/max time of each and the ratios of the medians.
#   sudo scripts/hier_bench.sh [BUILD_DIR]
#   env: HOSTS="2 3" RATE=5gbit REPS=3 MIN=1M MAX=64M ITERS=10 RANKS_PER_HOST=2
#        VARIANTS="ring hier auto gloo" (gloo, or any ZC_ALGO value such as hd)
# Needs root (namespaces); exits 77 otherwise. Removes its namespaces on exit.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
hosts_list=${HOSTS:-"2 3"}
rate=${RATE:-5gbit}
reps=${REPS:-3}
min=${MIN:-1M}
max=${MAX:-64M}
iters=${ITERS:-10}
per=${RANKS_PER_HOST:-2}
zcrun=$build/launcher/zcrun
coll=$build/perf/zc_coll
gloo=$build/perf/peers/gloo_allreduce
[ "$(id -u)" = 0 ] || { echo "SKIP: hier_bench.sh needs root (network namespaces)"; exit 77; }
for f in "$zcrun" "$coll"; do [ -x "$f" ] || { echo "missing $f (ninja -C $build)"; exit 1; }; done
[ -x "$gloo" ] || { echo "note: $gloo not built (gloo missing): gloo not measured"; gloo=""; }

pre=zchb
dir=$(mktemp -d /tmp/hier_bench.XXXXXX)
cleanup() {
  for ns in $(ip netns list 2>/dev/null | awk -v p="$pre-" 'index($1, p) == 1 {print $1}'); do
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cleanup
mkdir -p "$dir"

# enter HOST CMD...: runs CMD as a rank of HOST (its network namespace, a
# UTS namespace named after it, its interface for zcomm and gloo). zcrun's
# remote-shell template.
cat >"$dir/enter" <<'EOF'
#!/bin/sh
h=$1; shift
export ZC_SOCKET_IFNAME==zc0 GLOO_SOCKET_IFNAME=zc0
exec ip netns exec "$h" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$@"
EOF
chmod +x "$dir/enter"

make_hosts() {  # make_hosts H
  ip netns add $pre-hub
  ip -n $pre-hub link set lo up
  ip -n $pre-hub link add br0 type bridge
  ip -n $pre-hub addr add 10.79.0.254/24 dev br0
  ip -n $pre-hub link set br0 up
  for i in $(seq 1 "$1"); do
    ip netns add $pre-h$i
    ip -n $pre-h$i link set lo up
    ip link add $pre-v$i netns $pre-hub type veth peer name zc0 netns $pre-h$i
    ip -n $pre-h$i addr add 10.79.0.$i/24 dev zc0
    ip -n $pre-hub link set $pre-v$i master br0
    ip -n $pre-h$i link set zc0 up
    ip -n $pre-hub link set $pre-v$i up
    # Both directions of the host's link: its egress (zc0) and ingress (the
    # hub's end). burst: enough for one 64 KiB GSO segment and more.
    ip netns exec $pre-h$i tc qdisc add dev zc0 root tbf rate "$rate" burst 512kb latency 20ms
    ip netns exec $pre-hub tc qdisc add dev $pre-v$i root tbf rate "$rate" burst 512kb latency 20ms
  done
}

drop_hosts() {
  for ns in $(ip netns list | awk -v p="$pre-" 'index($1, p) == 1 {print $1}'); do ip netns del "$ns"; done
}

# zc ALGO H OUT: zc_coll under zcrun in the hub, ranks in the hosts.
zc() {
  local algo=$1 h=$2 out=$3 spec="" i
  for i in $(seq 1 "$h"); do spec="$spec${spec:+,}$pre-h$i:$per"; done
  ip netns exec $pre-hub env ZC_SOCKET_IFNAME==br0 ZC_ALGO="$algo" ZC_TIMEOUT=120 \
    "$zcrun" --timeout 600 --rsh "$dir/enter {host}" -H "$spec" \
    "$coll" --coll allreduce -b "$min" -e "$max" -f 2 -d float32 -o sum -n "$iters" -w 2 \
    --json "$out" >"$out.log" 2>&1 || { echo "zc_coll ZC_ALGO=$algo failed:"; cat "$out.log"; exit 1; }
}

# gl H OUT: gloo's ring allreduce, ranks started in their hosts, a file store.
gl() {
  local h=$1 out=$2 n=$(($1 * per)) r pids=""
  local store
  store=$(mktemp -d "$dir/store.XXXXXX")
  for r in $(seq 0 $((n - 1))); do
    "$dir/enter" $pre-h$((r / per + 1)) "$gloo" --rank "$r" --size "$n" --store "$store" \
      --algo ring -b "$min" -e "$max" -f 2 -n "$iters" -w 2 --timeout-s 300 \
      $([ "$r" = 0 ] && echo --json "$out") >"$out.$r.log" 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || { echo "gloo_allreduce failed:"; cat "$out".*.log; exit 1; }; done
}

echo "# hier_bench: $(nproc) cores, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $per ranks per host, tbf $rate both directions of every host link, float32 sum, $iters iterations per size"
variants=${VARIANTS:-"ring hier auto gloo"}  # gloo, or any ZC_ALGO value
[ -n "$gloo" ] || variants=${variants//gloo/}
for h in $hosts_list; do
  make_hosts "$h"
  for rep in $(seq 1 "$reps"); do
    for v in $variants; do
      out="$dir/h$h.$v.$rep.json"
      if [ "$v" = gloo ]; then gl "$h" "$out"; else zc "$v" "$h" "$out"; fi
    done
  done
  drop_hosts
  /usr/bin/python3 - "$dir" "$h" "$reps" "$variants" "$per" <<'EOF'
import json, statistics, sys
d, h, reps, variants, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(), int(sys.argv[5])
t, algo = {}, {}
for v in variants:
    for rep in range(1, reps + 1):
        j = json.load(open("%s/h%d.%s.%d.json" % (d, h, v, rep)))
        if not j.get("complete", True) or j.get("error"):
            sys.exit("%s rep %d: %s" % (v, rep, j.get("error")))
        for row in j["results"]:
            if row.get("wrong", 0):
                sys.exit("%s rep %d: %d wrong elements at size %d" % (v, rep, row["wrong"], row["size"]))
            t.setdefault((v, row["size"]), []).append(row["time_us"] / 1e3)
            if row.get("algo"):
                algo[(v, row["size"])] = row["algo"]
sizes = sorted({s for (_, s) in t})
print("\n## %d hosts x %d ranks: time per allreduce, ms (min/median/max of %d runs)" % (h, per, reps))
ratios = [(a, b) for a, b in (("ring", "hier"), ("hd", "hier"), ("gloo", "hier"), ("ring", "auto"))
          if a in variants and b in variants]
print("%8s " % "MiB" + " ".join("%-22s" % v for v in variants) +
      "".join("  %9s" % ("%s/%s" % r) for r in ratios) + ("  auto=" if "auto" in variants else ""))
for s in sizes:
    med = {}
    cells = []
    for v in variants:
        x = sorted(t[(v, s)])
        med[v] = statistics.median(x)
        cells.append("%-22s" % ("%.2f/%.2f/%.2f" % (x[0], med[v], x[-1])))
    print("%8g " % (s / 2**20) + " ".join(cells) +
          "".join("  %8.2fx" % (med[a] / med[b]) for a, b in ratios) +
          ("  %s" % algo.get(("auto", s), "?") if "auto" in variants else ""))
EOF
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
