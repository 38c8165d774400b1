# A real Slurm cluster from Debian's packages on emulated hosts (sourced by
# bash after emuhosts.sh; needs root). Host "ctl" runs munged and
# slurmctld and is the login host where srun/sbatch/zcrun run; hosts
# n1..nN run slurmd (and, with cluster_start_sshd, sshd). Every file the
# daemons use (munge key and socket, slurm.conf, state and spool
# directories, logs, pid files) is in the test's temporary directory;
# the machine's /etc/slurm, /etc/munge and /etc/ssh are never read or
# written (SLURM_CONF, munged's and sshd's options point at ours).
#
#   cluster_init NODES          NODES compute hosts n1..nNODES (10.88.0.i),
#                               ctl at 10.88.0.254; a temporary directory
#                               $CLUSTER_DIR; traps cleanup
#   cluster_start_slurm         munged, slurmctld, slurmd on every node;
#                               returns when every node is idle
#   cluster_start_sshd          sshd on every node, a key pair for root,
#                               an ssh client config: $CLUSTER_SSH_CONFIG
#   login CMD...                run CMD on ctl with SLURM_CONF set
#   cluster_logs                print the daemons' logs (after a failure)
#   cluster_down                stop everything, remove the namespaces
#                               (the trap calls it, also on failure)
#   cluster_finish              the same, then fail if anything is left
# Exits 77 (SKIP) with the reason where the machine cannot do this.

CLUSTER_SLURM_BIN=/usr/sbin
CLUSTER_NODES=0

cluster_skip() { echo "SKIP: $*"; exit 77; }

cluster_init() {
  local n=$1 i
  local why
  why=$(emu_can_run) || cluster_skip "$why"
  trap 'cluster_down' EXIT
  trap 'exit 130' INT TERM
  CLUSTER_DIR=$(mktemp -d /tmp/zcslurm.XXXXXX)
  CLUSTER_NODES=$n
  emu_init "zcemu$$" "$CLUSTER_DIR"
  emu_sweep_stale
  emu_add ctl 10.88.0.254
  for i in $(seq 1 "$n"); do emu_add "n$i" "10.88.0.$i"; done
  emu_up || { cluster_logs; exit 1; }
}

cluster_need() {
  local p
  for p in "$@"; do
    command -v "$p" >/dev/null || [ -x "$CLUSTER_SLURM_BIN/$p" ] ||
      cluster_skip "$p is not installed (scripts/setup.sh installs slurmctld, slurmd, slurm-client, munge, openssh-server)"
  done
}

cluster_nodelist() { echo "n[1-$CLUSTER_NODES]"; }

cluster_write_conf() {
  local d=$CLUSTER_DIR i
  mkdir -p "$d/ctld" "$d/spool"
  for i in $(seq 1 "$CLUSTER_NODES"); do mkdir -p "$d/spool/n$i"; done
  # CPUs=4 with config_overrides: 2 ranks per node even on a 2-core machine
  # (the nodes share its cores). proctrack/linuxproc and task/none: no
  # cgroup hierarchy of our own; every process of a step is still found
  # through its parent chain and killed with the step. TmpFS, where
  # mpi/pmix makes its per-step directories, is each host's own /run/tmp.
  # SlurmdTimeout=20: a killed node is declared down, and its jobs ended,
  # within about 20 s (300 s by default).
  cat >"$d/slurm.conf" <<EOF
ClusterName=zcemu
SlurmctldHost=ctl(10.88.0.254)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$d/ctld
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd-%n.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=20
KillWait=2
MessageTimeout=20
InactiveLimit=0
MinJobAge=2
MailProg=/bin/true
TmpFS=/run/tmp
EOF
  for i in $(seq 1 "$CLUSTER_NODES"); do
    echo "NodeName=n$i NodeAddr=10.88.0.$i CPUs=4 RealMemory=1000 State=UNKNOWN" >>"$d/slurm.conf"
  done
  echo "PartitionName=emu Nodes=$(cluster_nodelist) Default=YES MaxTime=INFINITE State=UP" >>"$d/slurm.conf"
  export SLURM_CONF=$d/slurm.conf
}

# munged in the foreground on ctl; its socket, in our directory, serves
# every host (they share the file system).
cluster_start_munge() {
  local d=$CLUSTER_DIR/munge
  mkdir -p -m 0711 "$d"  # clients need x to reach the socket
  dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$d/munge.key"
  emu_exec ctl munged -F --force --key-file="$d/munge.key" --socket="$d/munge.socket" \
    --pid-file="$d/munged.pid" --log-file="$d/munged.log" --seed-file="$d/munged.seed" \
    >"$d/munged.out" 2>&1 &
  disown "$!"
  cluster_wait "munged's socket" 10 test -S "$d/munge.socket"
}

# cluster_wait WHAT SECONDS CMD...: until CMD succeeds, at most SECONDS.
cluster_wait() {
  local what=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $end ]; then
      echo "FAIL: $what not ready after $secs s"; cluster_logs; exit 1
    fi
    sleep 0.1
  done
}

cluster_all_idle() {
  local idle
  idle=$(login sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
  [ "$idle" -eq "$CLUSTER_NODES" ]
}

cluster_start_slurm() {
  cluster_need munged slurmctld slurmd srun sbatch sinfo
  cluster_write_conf
  cluster_start_munge
  emu_exec ctl "$CLUSTER_SLURM_BIN/slurmctld" -D -i -f "$SLURM_CONF" \
    >"$CLUSTER_DIR/slurmctld.out" 2>&1 &
  disown "$!"
  local i
  for i in $(seq 1 "$CLUSTER_NODES"); do
    emu_exec "n$i" "$CLUSTER_SLURM_BIN/slurmd" -D -f "$SLURM_CONF" \
      >"$CLUSTER_DIR/slurmd-n$i.out" 2>&1 &
    disown "$!"
  done
  cluster_wait "every node idle in sinfo" 60 cluster_all_idle
  login srun --mpi=list 2>&1 | grep -qw pmix ||
    { echo "FAIL: srun --mpi=list does not list pmix:"; login srun --mpi=list; exit 1; }
}

login() { emu_exec ctl env SLURM_CONF="$SLURM_CONF" "$@"; }

cluster_start_sshd() {
  cluster_need sshd ssh ssh-keygen
  local d=$CLUSTER_DIR/ssh i
  mkdir -p -m 0700 "$d"
  ssh-keygen -q -t ed25519 -N '' -f "$d/host_key"
  ssh-keygen -q -t ed25519 -N '' -f "$d/id"
  cp "$d/id.pub" "$d/authorized_keys"
  {
    for i in $(seq 1 "$CLUSTER_NODES"); do echo "n$i,10.88.0.$i $(cat "$d/host_key.pub")"; done
  } >"$d/known_hosts"
  cat >"$d/sshd_config" <<EOF
HostKey $d/host_key
AuthorizedKeysFile $d/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PidFile none
StrictModes no
AcceptEnv none
PrintMotd no
LogLevel INFO
EOF
  cat >"$d/ssh_config" <<EOF
Host *
  IdentityFile $d/id
  IdentitiesOnly yes
  UserKnownHostsFile $d/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  User root
  LogLevel ERROR
EOF
  CLUSTER_SSH_CONFIG=$d/ssh_config
  local sshd; sshd=$(command -v sshd || echo /usr/sbin/sshd)
  for i in $(seq 1 "$CLUSTER_NODES"); do
    # /run is the host's own tmpfs: sshd's privilege-separation directory.
    emu_exec "n$i" sh -c 'mkdir -p -m 0755 /run/sshd && exec "$@"' sh \
      "$sshd" -D -e -f "$d/sshd_config" >"$CLUSTER_DIR/sshd-n$i.log" 2>&1 &
    disown "$!"
  done
  for i in $(seq 1 "$CLUSTER_NODES"); do
    cluster_wait "sshd on n$i" 20 emu_exec ctl ssh -F "$d/ssh_config" "n$i" true
  done
}

cluster_logs() {
  local f
  for f in "$CLUSTER_DIR"/*.log "$CLUSTER_DIR"/*.out "$CLUSTER_DIR"/munge/*.log "$CLUSTER_DIR"/munge/*.out; do
    [ -s "$f" ] || continue
    echo "---- $(basename "$f") (last 40 lines)"
    tail -n 40 "$f"
  done
}

cluster_down() {
  local rc=$?
  if [ -n "${CLUSTER_DIR:-}" ]; then
    [ "${CLUSTER_KEEP_LOGS:-0}" = 1 ] && cluster_logs
    emu_down
    rm -rf "$CLUSTER_DIR"
  fi
  return $rc
}

# The end of a test: take everything down and fail if anything is left: a
# namespace, a process that uses the test's directory, the directory.
cluster_finish() {
  local dir=$CLUSTER_DIR left
  cluster_down
  CLUSTER_DIR=""
  left=$(emu_list_ns "$EMU_PRE")
  [ -z "$left" ] || { echo "FAIL: namespaces left behind: $left"; exit 1; }
  left=$(pgrep -f "$dir" || true)
  [ -z "$left" ] || { echo "FAIL: processes left behind: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ,)")"; exit 1; }
  [ ! -e "$dir" ] || { echo "FAIL: $dir left behind"; exit 1; }
  echo "OK: nothing left behind (namespaces, processes, $dir)"
}
