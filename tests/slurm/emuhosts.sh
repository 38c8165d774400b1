# Emulated hosts on one machine (sourced by bash; needs root).
#
# A host is a network namespace, plus a UTS and mount namespace held by a
# "holder" process (sleep) that lives in it. Every host has:
#   - its own hostname (UTS namespace),
#   - one interface eth0 with its own address, a veth pair whose other end
#     is a port of a bridge in a switch namespace of the test's own (no
#     route leads anywhere else: traffic stays between the test's hosts),
#   - /etc/hosts naming every host of the test (a bind mount in its mount
#     namespace; the machine's own file is untouched),
#   - its own /run and /dev/shm (tmpfs in its mount namespace; vanish with
#     it), so nothing a daemon or rank writes there outlives the host;
#     /run/tmp is the host's private temporary directory.
# Processes enter a host with emu_exec (nsenter into the holder's
# namespaces); children inherit them (a slurmd's tasks run on its host).
#
#   emu_init PREFIX DIR    names start with PREFIX (unique per run), DIR is
#                          the test's private temporary directory
#   emu_add NAME ADDR      declare a host (before emu_up)
#   emu_up                 make the switch and every declared host
#   emu_exec NAME CMD...   run CMD on host NAME (foreground)
#   emu_kill_host NAME     SIGKILL every process on host NAME (a crash)
#   emu_addr NAME          the host's address
#   emu_down               kill every process in the hosts' namespaces,
#                          delete them (idempotent; call from a trap)
#   emu_sweep_stale        remove namespaces of earlier runs whose test
#                          process is gone (prefix zcemu<pid>-)
#   emu_can_run            exit status 0 when this machine can make hosts;
#                          else prints why on stdout
# Names: the prefix is zcemu<pid of the test>; eth0 is the same name on
# every host, so ZC_SOCKET_IFNAME==eth0 picks it on each.

EMU_SUBNET=10.88.0
EMU_HOSTS=()
declare -A EMU_ADDR
declare -A EMU_HOLDER

emu_init() {
  EMU_PRE=$1
  EMU_DIR=$2
  EMU_HOSTS=()
}

emu_can_run() {
  if [ "$(id -u)" != 0 ]; then echo "needs root (network, UTS and mount namespaces)"; return 1; fi
  local t
  for t in ip nsenter unshare mount; do
    command -v $t >/dev/null || { echo "$t not installed"; return 1; }
  done
  local probe="zcemuprobe$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "cannot create network namespaces here (ip netns add failed)"; return 1
  fi
  local ok=0 why="" dir
  dir=$(mktemp -d)
  echo "127.0.0.1 localhost" >"$dir/hosts"
  why=$(EMU_DIR=$dir timeout 10 bash -c "$(declare -p EMU_HOLDER_SCRIPT); $(declare -f emu_holder)"'
        emu_holder "$0" zcemu-probe "$1/ready" & h=$!
        n=0; until [ -e "$1/ready" ] || [ $n -gt 300 ]; do n=$((n + 1)); sleep 0.02; done
        kill $h; wait $h 2>/dev/null; [ -e "$1/ready" ]' "$probe" "$dir" 2>&1) || ok=1
  ip netns del "$probe" 2>/dev/null || true
  rm -rf "$dir"
  if [ $ok != 0 ]; then echo "cannot make UTS and mount namespaces here: $why"; return 1; fi
  return 0
}

emu_add() {
  EMU_HOSTS+=("$1")
  EMU_ADDR[$1]=$2
}

emu_addr() { echo "${EMU_ADDR[$1]}"; }

emu_ns() { echo "$EMU_PRE-$1"; }

emu_up() {
  local sw="$EMU_PRE-sw" h i=0
  {
    echo "127.0.0.1 localhost"
    for h in "${EMU_HOSTS[@]}"; do echo "${EMU_ADDR[$h]} $h"; done
  } >"$EMU_DIR/hosts"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for h in "${EMU_HOSTS[@]}"; do
    i=$((i + 1))
    local ns; ns=$(emu_ns "$h")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "p$i" netns "$sw" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    ip -n "$ns" addr add "${EMU_ADDR[$h]}/24" dev eth0
    ip -n "$ns" link set eth0 up
    emu_start_holder "$h"
  done
  emu_wait_links
}

# The holder makes the host's UTS and mount namespaces inside its network
# namespace and reports ready through a file only once they are complete.
# Its mount namespace is made from this machine's (not ip netns exec's,
# which replaces /sys and so loses /sys/fs/cgroup, which slurmd needs): a
# fresh sysfs shows the host's own interfaces, and the cgroup tree is moved
# back under it.
EMU_HOLDER_SCRIPT='
  set -e
  hostname "$1"
  mount --bind "$2" /etc/hosts
  mount -t tmpfs -o mode=0755 tmpfs /run
  mkdir -m 1777 /run/tmp
  mount -t tmpfs -o mode=1777 tmpfs /dev/shm
  mkdir -p "$3.cg"
  if mountpoint -q /sys/fs/cgroup; then mount --rbind /sys/fs/cgroup "$3.cg"; fi
  mount -t sysfs sysfs /sys
  if mountpoint -q "$3.cg"; then mount --move "$3.cg" /sys/fs/cgroup; fi
  rmdir "$3.cg"
  : >"$3"
  exec sleep infinity'

# emu_holder NETNS HOSTNAME READY-FILE: run a holder (foreground).
emu_holder() {
  exec unshare --uts --mount --propagation private nsenter --net="/run/netns/$1" \
    sh -c "$EMU_HOLDER_SCRIPT" sh "$2" "$EMU_DIR/hosts" "$3"
}

emu_start_holder() {
  local h=$1 ns; ns=$(emu_ns "$1")
  local ready="$EMU_DIR/holder-$h.ready"
  rm -f "$ready"
  emu_holder "$ns" "$h" "$ready" >"$EMU_DIR/holder-$h.log" 2>&1 &
  EMU_HOLDER[$h]=$!
  disown "$!"  # killed by emu_down; no job-control notice
  local n=0
  until [ -e "$ready" ]; do
    if ! kill -0 "${EMU_HOLDER[$h]}" 2>/dev/null || [ $n -gt 500 ]; then
      echo "emuhosts: host $h did not come up:"; cat "$EMU_DIR/holder-$h.log"; return 1
    fi
    n=$((n + 1)); sleep 0.02
  done
}

# One TCP connection from the first host to each other one proves the
# plumbing (addresses, veths, bridge) before anything builds on it.
emu_wait_links() {
  local first=${EMU_HOSTS[0]} h n lpid
  for h in "${EMU_HOSTS[@]:1}"; do
    emu_exec "$h" timeout 10 python3 -c 'import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 9)); s.listen(); s.accept()' "${EMU_ADDR[$h]}" &
    lpid=$!
    n=0
    until emu_exec "$first" timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/9"' "${EMU_ADDR[$h]}" 2>/dev/null; do
      n=$((n + 1))
      if [ $n -gt 100 ] || ! kill -0 $lpid 2>/dev/null; then
        echo "emuhosts: $h (${EMU_ADDR[$h]}) unreachable from $first"; return 1
      fi
      sleep 0.05
    done
    wait $lpid || { echo "emuhosts: $h saw no connection from $first"; return 1; }
  done
}

emu_exec() {
  local h=$1; shift
  nsenter -t "${EMU_HOLDER[$h]}" -n -u -m --wd="$PWD" -- "$@"
}

# Every process in the given namespaces dies: daemons, ranks, holders. By
# pid, only what lives in namespaces this run made.
emu_kill_ns() {
  local ns pids round
  for round in $(seq 1 50); do
    pids=""
    for ns in "$@"; do pids="$pids $(ip netns pids "$ns" 2>/dev/null)"; done
    pids=$(echo $pids)
    [ -n "$pids" ] || return 0
    kill -9 $pids 2>/dev/null || true
    sleep 0.1
  done
  echo "emuhosts: processes still alive in $*: $pids" >&2
  return 1
}

# emu_kill_host NAME: the host crashes (every process on it dies at once);
# its namespaces stay, so its peers see their connections reset.
emu_kill_host() { emu_kill_ns "$(emu_ns "$1")"; }

emu_kill_all() { emu_kill_ns $(emu_list_ns "$1"); }

emu_list_ns() {
  ip netns list 2>/dev/null | awk -v p="$1-" 'index($1, p) == 1 {print $1}'
}

emu_down() {
  [ -n "${EMU_PRE:-}" ] || return 0
  emu_kill_all "$EMU_PRE"
  local ns
  for ns in $(emu_list_ns "$EMU_PRE"); do ip netns del "$ns" 2>/dev/null || true; done
}

emu_sweep_stale() {
  local ns pid pre
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^zcemu[0-9]*-' || true); do
    pre=${ns%%-*}
    pid=${pre#zcemu}
    [ "$pid" = "$$" ] && continue
    kill -0 "$pid" 2>/dev/null && continue
    emu_kill_all "$pre"
    ip netns del "$ns" 2>/dev/null || true
  done
}
