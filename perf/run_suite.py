#!/usr/bin/python3
"""run_suite.py — the zcomm benchmark suite, side by side with peer libraries.

    perf/run_suite.py --build BUILDDIR [--quick | --smoke] [--out DIR]
                      [--only machine,memcpy,p2p,allreduce2,allreduceN,
                              bestmpi,limit,ps,engine,comm_init,torch,hvd,
                              recovery]
                      [--np N] [--no-docs-img] [--timeout-scale X]
                      [--ps-models vgg16,lstm] [--ps-reps R]
                      [--best-rounds R]
                      [--allow-missing-peers]

In one run:
  * machine: CPU model, cores, memory, kernel, peer-library versions;
  * memcpy:  single-thread memcpy bandwidth (the limit of shm transfers) and
             STREAM-like copy/triad numbers, 1 thread and all cores;
  * p2p:     zcomm zc_send/zc_recv (ZC_TRANSPORT=shm and tcp, zero-copy and
             copy mode) vs Open MPI ping-pong vs gRPC (tensor as protobuf
             bytes): one-way latency and bandwidth per size;
  * allreduce2 / allreduceN: zcomm allreduce (auto, and forced
             ZC_TRANSPORT=tcp) vs MPI_Allreduce vs Gloo (AllreduceRing and
             AllreduceRingChunked) vs torch.distributed(gloo), 2 ranks, then
             N ranks (default 4, oversubscribed when N > cores);
  * ps:      the paper's Table 2 training step (perf/zc_ps_train,
             perf/common/ps_models.h) on zcomm's parameter server over shm
             and over tcp, against a gRPC parameter server
             (perf/peers/grpc_ps/grpc_ps_train, TensorFlow's path) and
             against zcomm allreduce of the same tensors; 2 workers + 2
             co-located servers, and 3 workers + 1 server; the three runs
             alternate (shm, tcp, gRPC, shm, tcp, gRPC, ...), R times;
  * bestmpi: zcomm against the strongest MPI at each size: Open MPI with
             its default collectives, with han (coll_han_priority 100) and
             with adapt (coll_adapt_priority 100), and MPICH (each MPI's
             programs built against it, started by its own mpirun);
             allreduce 8 B-64 MiB on 2 and N ranks, p2p one-way latency
             (3 times per round: its jobs take a fraction of a second);
             in rounds, each ratio against the best MPI of its round;
  * limit:   the machine's own limit: zcomm's allreduce at 16-256 MiB, out
             of place and in place, on zc_mem_alloc buffers and on malloc'd
             memory, against perf/ideal_allreduce (every rank's buffers in
             one process, each input read once and each output written
             once, no communication), 2 and N ranks, in rounds: the ideal
             and zcomm back to back, each ratio within its own round;
  * engine:  perf/zc_engine, the engine's per-step overhead with 128 small
             tensors, fusion on/off, negotiation collectives per cycle;
  * comm_init: perf/zc_comm_init, zc_comm_init_rank / split / dup at 2-5
             ranks, shm and tcp;
  * torch:   perf/torch_zcomm_bench.py, torch.distributed's all_reduce time
             per size and DDP training throughput, backend zcomm vs gloo in
             alternating pairs in the same processes, 2 and 4 ranks;
  * hvd:     perf/hvd_bench.py, the Horovod API (zcomm.torch, the engine)
             against DDP on gloo: training throughput in alternating pairs,
             and the engine's per-step overhead from Python with fusion on
             and off, negotiation collectives per cycle; 2 and 4 ranks.
  * recovery: perf/recovery_bench.py, a rank of 4 killed (SIGKILL) in
             training: time to the survivors' next completed step with
             hvd.elastic.run (shrink, no restart) against restarting the
             job (zcrun again) and reloading its last checkpoint from disk;
             shm and tcp, in alternating rounds; models small (smoke),
             small and medium (quick, full); the 103 M-parameter model
             (large: 2 minutes a round) only when asked for:
             perf/recovery_bench.py --models large.
Prints tables with ratios (zcomm time / peer time per size: below 1 means
zcomm is faster), writes results.json, summary.md, logs/ and PNG plots into
the output directory (default perf/results/, git-ignored) and copies the
plots into docs/img/.

Every child process runs under a timeout; a peer that fails is reported as
"n/a: <reason>" and the suite goes on. The exit status is 1 when a zcomm run
failed (exit status, timeout, no result or an unfinished one) or reported
wrong results (#wrong > 0). A peer that `scripts/setup.sh --perf` installs
(the peers whose package setup.sh names: Open MPI, Gloo, gRPC, torch) but
that the build lacks, or that is not importable, fails the suite before
anything runs, loudly, with the fix (a build configured before the package
was installed: scripts/build.sh reconfigures); --allow-missing-peers runs
the rest and reports them as n/a. Every run that uses tcp stays on
loopback: every child has ZC_SOCKET_IFNAME=lo, GLOO_SOCKET_IFNAME=lo,
OMPI_MCA_btl_tcp_if_include=lo and OMPI_MCA_oob_tcp_if_include=lo, and the
gRPC programs bind and dial 127.0.0.1. --smoke runs tiny sizes once (seconds
per section) to check that everything runs. Use Debian's
/usr/bin/python3 (numpy and matplotlib from python3-numpy/-matplotlib; without
them the plots are skipped).
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PERF_DIR = os.path.dirname(os.path.abspath(__file__))
SRC_DIR = os.path.dirname(PERF_DIR)

# Sweep parameters. quick: about 5 minutes on 2 cores.
MODES = {
    "quick": dict(
        memcpy_size="64M", memcpy_iters=3,
        p2p_max="16M", p2p_iters=200, p2p_bw_iters=10, p2p_min_iters=3,
        grpc_max="16M", grpc_iters=50, grpc_bw_iters=5,
        coll_min="8", coll_max="64M", coll_iters=10, coll_min_iters=3,
        collN_max="16M",
        ps_models="lstm,vgg16", ps_reps=2, ps_steps=3,
        engine_steps=30, engine_reps=3, init_reps=10,
        torch_args=["--quick"], torch_ranks=(2, 4),
        torch_async_args=["--pairs", "3", "--max-bytes", "4096"],
        exposed_args=["--models", "mlp25m", "--rounds", "3", "--steps", "3"],
        hvd_args=["--pairs", "2", "--steps", "30", "--", "--num-iters", "2",
                  "--num-batches-per-iter", "2", "--num-warmup-batches", "1"],
        hvd_ranks=(2, 4), torch_timeout=600, reps=3,
        limit_min="16M", limit_max="64M", limit_rounds=3, limit_iters=5,
        best_max="16M", best_rounds=2, best_p2p_iters=10000,
        best_p2p_repeats=3,
        tcpsock_min="256K", tcpsock_max="4M", tcpsock_rounds=3,
        tcpsock_iters=200,
        recovery_rounds=3,
        recovery_models="small,medium",
        timeout=240),
    # smoke: tiny sizes, one repetition: seconds per section; checks that
    # every program runs and the suite's verdict (tests/perf), not numbers.
    "smoke": dict(
        memcpy_size="1M", memcpy_iters=1,
        p2p_max="4K", p2p_iters=20, p2p_bw_iters=2, p2p_min_iters=1,
        grpc_max="4K", grpc_iters=5, grpc_bw_iters=2,
        coll_min="8", coll_max="4K", coll_iters=3, coll_min_iters=1,
        collN_max="4K",
        ps_models="lstm", ps_reps=1, ps_steps=1,
        engine_steps=5, engine_reps=1, init_reps=2,
        torch_args=["--quick"], torch_ranks=(2,),
        torch_async_args=["--pairs", "1", "--max-bytes", "32"],
        exposed_args=["--models", "mlp25m", "--rounds", "1", "--steps", "1"],
        hvd_args=["--pairs", "1", "--steps", "5", "--", "--num-iters", "1",
                  "--num-batches-per-iter", "1", "--num-warmup-batches", "1"],
        hvd_ranks=(2,), torch_timeout=300, reps=1,
        limit_min="1M", limit_max="2M", limit_rounds=1, limit_iters=2,
        best_max="4K", best_rounds=1, best_p2p_iters=50,
        best_p2p_repeats=1,
        tcpsock_min="256K", tcpsock_max="512K", tcpsock_rounds=1,
        tcpsock_iters=5,
        recovery_rounds=1,
        recovery_models="small",
        timeout=120),
    "full": dict(
        memcpy_size="256M", memcpy_iters=10,
        p2p_max="1G", p2p_iters=1000, p2p_bw_iters=50, p2p_min_iters=5,
        grpc_max="1G", grpc_iters=200, grpc_bw_iters=20,
        coll_min="8", coll_max="256M", coll_iters=20, coll_min_iters=5,
        collN_max="256M",
        ps_models="vgg16,lstm,inception3", ps_reps=3, ps_steps=5,
        engine_steps=50, engine_reps=5, init_reps=20,
        # torch and hvd: kept short (about 2-3 minutes each on 2 cores):
        # all_reduce up to 8 MiB, 5 pairs; hvd 3 pairs of short runs.
        # perf/torch_zcomm_bench.py and perf/hvd_bench.py run alone for
        # longer sweeps
        torch_args=["--pairs", "5", "--max-bytes", str(64 << 20),
                    "--ops", "all_reduce,broadcast,all_gather"],
        torch_async_args=["--pairs", "5", "--max-bytes", "4096"],
        exposed_args=["--models", "mlp25m,vgg_fc", "--rounds", "5",
                      "--steps", "3"],
        torch_ranks=(2, 4),
        hvd_args=["--pairs", "3", "--steps", "50", "--", "--num-iters", "2",
                  "--num-batches-per-iter", "2", "--num-warmup-batches", "1"],
        limit_min="16M", limit_max="256M", limit_rounds=5, limit_iters=5,
        best_max="64M", best_rounds=3, best_p2p_iters=10000,
        best_p2p_repeats=3,
        tcpsock_min="256K", tcpsock_max="4M", tcpsock_rounds=5,
        tcpsock_iters=1000,
        # the torch programs' timeout is the other programs' one: the DDP
        # runs of the 100M-parameter model need 10+ minutes on a loaded VM
        hvd_ranks=(2, 4), torch_timeout=1500, reps=3,
        recovery_rounds=5,
        recovery_models="small,medium",
        timeout=1500),
}


# ---------------------------------------------------------------- helpers --

def log(msg=""):
    print(msg, flush=True)


def parse_size(text):
    t = str(text).strip().upper().rstrip("B")
    mul = 1
    if t and t[-1] in "KMG":
        mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[t[-1]]
        t = t[:-1]
    return int(t) * mul


def human(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


def sh(cmd, timeout=20):
    """Output of a small command, or '' when it fails."""
    try:
        p = subprocess.run(cmd, shell=isinstance(cmd, str),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, text=True)
        return p.stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def tail_text(path, nlines=6):
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip() for l in f if l.strip()]
    except OSError:
        return ""
    # prefer lines that say "error"
    errs = [l for l in lines if "error" in l.lower()]
    pick = errs[-3:] if errs else lines[-nlines:]
    return " | ".join(pick)[-600:]


def kill_group(p):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            p.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


# Every child's environment: tcp stays on loopback.
LOOPBACK_ENV = {
    "ZC_SOCKET_IFNAME": "lo",
    "GLOO_SOCKET_IFNAME": "lo",
    "OMPI_MCA_btl_tcp_if_include": "lo",
    "OMPI_MCA_oob_tcp_if_include": "lo",
    # MPICH: its launcher (hydra) and UCX, should they open sockets
    "HYDRA_IFACE": "lo",
    "UCX_NET_DEVICES": "lo",
}

# Each MPI by its own launcher: the mpirun alternative may point to either.
OPENMPI_RUN = ("mpirun.openmpi", "mpirun")
MPICH_RUN = ("mpirun.mpich",)


def which_first(names):
    for n in names:
        path = shutil.which(n)
        if path:
            return path
    return None

# The peers, the Debian package of each that `scripts/setup.sh --perf`
# installs, what the build makes of it, and the sections that run it.
PEERS = {
    "mpi": dict(name="Open MPI", package="libopenmpi-dev",
                progs=("perf/peers/mpi_pingpong", "perf/peers/mpi_allreduce"),
                sections=("p2p", "allreduce2", "allreduceN", "bestmpi")),
    "mpich": dict(name="MPICH", package="libmpich-dev",
                  progs=("perf/peers/mpich_pingpong",
                         "perf/peers/mpich_allreduce"),
                  sections=("bestmpi",)),
    "gloo": dict(name="Gloo", package="libgloo-dev",
                 progs=("perf/peers/gloo_allreduce",),
                 sections=("allreduce2", "allreduceN")),
    "grpc": dict(name="gRPC", package="libgrpc++-dev",
                 progs=("perf/peers/grpc_tensor/grpc_tensor_bench",
                        "perf/peers/grpc_ps/grpc_ps_train"),
                 sections=("p2p", "ps")),
    "torch": dict(name="torch", package="python3-torch", progs=(),
                  sections=("allreduce2", "allreduceN", "torch", "hvd",
                            "recovery")),
}
SETUP_SH = os.path.join(SRC_DIR, "scripts", "setup.sh")
SECTIONS_WITH_TORCH = frozenset(PEERS["torch"]["sections"])


def setup_packages(path=SETUP_SH):
    """The words of scripts/setup.sh: a peer whose package is among them is
    one the setup installs, so the suite must find it."""
    try:
        with open(path) as f:
            return set(re.findall(r"[\w.+-]+", f.read()))
    except OSError:
        return set()


def package_installed(pkg):
    return sh(["dpkg-query", "-W", "-f=${Status}", pkg]).endswith(
        " installed")


# Libraries that `scripts/setup.sh --perf` installs: a job of one of them
# that cannot run because its program is missing fails the suite.
SETUP_PEERS = tuple(k for k, v in PEERS.items()
                    if v["package"] in setup_packages())


class Job:
    """One benchmark run: its command(s), log, JSON and outcome."""

    def __init__(self, key, label, group, library, kind):
        self.key, self.label, self.group = key, label, group
        # kind: coll | p2p | memcpy | ps | engine | comm_init
        self.library, self.kind = library, kind
        self.rows, self.error, self.note = [], None, ""
        self.missing = False  # a program or library is missing (not built)
        self.wrong = False
        self.rep = None  # repetition (ps jobs)
        self.cmd, self.wall_s, self.load_before = [], 0.0, None
        self.data = {}

    def to_dict(self):
        return dict(key=self.key, label=self.label, group=self.group,
                    library=self.library, kind=self.kind, rows=self.rows,
                    error=self.error, note=self.note, cmd=self.cmd,
                    missing=self.missing, wrong=self.wrong, rep=self.rep,
                    wall_s=round(self.wall_s, 2),
                    load_before=self.load_before,
                    meta={k: v for k, v in self.data.items()
                          if k not in ("results",)})


class Suite:
    def __init__(self, a):
        self.a = a
        self.mode_name = ("smoke" if a.smoke else "quick" if a.quick
                          else "full")
        self.mode = MODES[self.mode_name]
        self.build = os.path.abspath(a.build)
        self.out = os.path.abspath(a.out)
        self.logs = os.path.join(self.out, "logs")
        os.makedirs(self.logs, exist_ok=True)
        # results of an earlier run must not mix with this one (only the
        # files this script writes are removed)
        ours = re.compile(r"^((p2p|allreduce\d+|limit\d+|bestmpi|memcpy|ps|engine|comm_init"
                          r"|torch|hvd)"
                          r"_[\w.-]+\.(json|png|log)"
                          r"|results\.json|summary\.md)$")
        for d in (self.out, self.logs):
            for f in os.listdir(d):
                path = os.path.join(d, f)
                if ours.match(f) and os.path.isfile(path):
                    os.unlink(path)
        self.jobs = []
        self.machine = {}
        self.timeout = int(self.mode["timeout"] * a.timeout_scale)
        self.ncpu = os.cpu_count() or 1
        # tcp only on loopback, for every child: zcrun passes its
        # environment to local ranks; gloo and torch read GLOO_SOCKET_IFNAME;
        # Open MPI's tcp transport and its runtime (oob) read these MCA
        # variables; the gRPC programs bind and dial 127.0.0.1 themselves.
        os.environ.update(LOOPBACK_ENV)

    def have_torch(self):
        if not hasattr(self, "_torch"):
            try:
                self._torch = subprocess.run(
                    ["/usr/bin/python3", "-c", "import torch.distributed"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    timeout=120).returncode == 0
            except Exception:  # noqa: BLE001
                self._torch = False
        return self._torch

    # ---- paths --------------------------------------------------------
    def prog(self, rel):
        p = os.path.join(self.build, rel)
        return p if os.path.isfile(p) and os.access(p, os.X_OK) else None

    # ---- running ------------------------------------------------------
    def _finish(self, job, json_path, rcs, timed_out, log_path, t0,
                parser=None):
        job.wall_s = time.time() - t0
        data = load_json(json_path) if json_path else None
        if parser and not timed_out and all(rc == 0 for rc in rcs):
            rows = parser(log_path)  # a program that prints text only
            data = dict(results=rows) if rows else None
        if data:
            job.data = data
            job.rows = data.get("results", []) or []
        err = (data or {}).get("error")
        if timed_out:
            job.error = "timeout after %ds" % self.timeout
            if job.rows:
                job.error += " (kept %d finished sizes)" % len(job.rows)
        elif err:
            job.error = err
        elif any(rc != 0 for rc in rcs):
            job.error = "exit code %s: %s" % (
                ",".join(str(r) for r in rcs if r != 0),
                tail_text(log_path) or "no output")
        elif data is None:
            job.error = "no JSON result written: %s" % (
                tail_text(log_path) or "no output")
        elif not data.get("complete", True):
            job.error = "incomplete run: the program exited 0 without " \
                "finishing its JSON"
        elif not job.rows:
            job.error = "no result rows: %s" % (tail_text(log_path) or
                                                "no output")
        if job.error and "symbol lookup error" in job.error:
            job.error = "libzcomm lacks a symbol: " + job.error
        bad = sum(1 for r in job.rows if (r.get("wrong") or 0) > 0)
        if bad or (job.error and "wrong result" in job.error.lower()):
            job.wrong = True
        if bad:
            job.note = (job.note + "; " if job.note else "") + \
                "WRONG RESULTS at %d sizes" % bad
        status = "ok" if not job.error else "n/a: " + job.error
        log("   -> %s (%.1fs)%s" % (status, job.wall_s,
                                     ("  [" + job.note + "]") if job.note
                                     else ""))

    def run(self, job, cmd, env=None, json_path=None, parser=None,
            timeout=None):
        """Runs one command (its own process group) under the timeout."""
        self.jobs.append(job)
        saved = self.timeout
        if timeout:
            self.timeout = timeout
        try:
            return self._run(job, cmd, env, json_path, parser)
        finally:
            self.timeout = saved

    def _run(self, job, cmd, env, json_path, parser):
        job.cmd = cmd
        job.load_before = os.getloadavg()[0]
        log("== %s" % job.label)
        log("   $ %s" % " ".join(cmd))
        log_path = os.path.join(self.logs, job.key + ".log")
        if json_path and os.path.exists(json_path):
            os.unlink(json_path)
        t0 = time.time()
        full_env = dict(os.environ)
        full_env.update(env or {})
        timed_out, rc = False, 0
        try:
            with open(log_path, "w") as lf:
                p = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT,
                                     env=full_env, start_new_session=True,
                                     cwd=self.out)
                try:
                    rc = p.wait(timeout=self.timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    kill_group(p)
                    rc = 124
        except OSError as e:
            job.error = "cannot start: %s" % e
            log("   -> n/a: " + job.error)
            return job
        self._finish(job, json_path, [rc], timed_out, log_path, t0, parser)
        if not job.error and self.a.verbose:
            with open(log_path) as f:
                sys.stdout.write(f.read())
        return job

    def run_multi(self, job, cmds, json_path):
        """Starts one process per rank (Gloo); one failure stops them all."""
        self.jobs.append(job)
        job.cmd = cmds[0] + ["(x%d ranks)" % len(cmds)]
        job.load_before = os.getloadavg()[0]
        log("== %s" % job.label)
        log("   $ %s   (one process per rank)" % " ".join(cmds[0]))
        log_path = os.path.join(self.logs, job.key + ".log")
        if os.path.exists(json_path):
            os.unlink(json_path)
        t0 = time.time()
        procs, rcs, timed_out = [], [], False
        with open(log_path, "w") as lf:
            try:
                for c in cmds:
                    procs.append(subprocess.Popen(
                        c, stdout=lf, stderr=subprocess.STDOUT,
                        start_new_session=True, cwd=self.out))
            except OSError as e:
                for p in procs:
                    kill_group(p)
                job.error = "cannot start: %s" % e
                log("   -> n/a: " + job.error)
                return job
            deadline = t0 + self.timeout
            pending = list(procs)
            while pending:
                time.sleep(0.05)
                for p in list(pending):
                    r = p.poll()
                    if r is not None:
                        pending.remove(p)
                        if r != 0:  # one rank failed: stop the others
                            time.sleep(1)
                            for q in pending:
                                kill_group(q)
                if time.time() > deadline and pending:
                    timed_out = True
                    for q in pending:
                        kill_group(q)
                    break
            rcs = [p.wait() for p in procs]
        self._finish(job, json_path, rcs, timed_out, log_path, t0)
        return job

    def skip(self, job, reason, missing=True):
        self.jobs.append(job)
        job.error = reason
        job.missing = missing
        log("== %s\n   -> n/a: %s" % (job.label, reason))
        return job

    # ---- peers the setup installs ----------------------------------------
    def missing_peers(self, only):
        """Peers that `scripts/setup.sh --perf` installs and the selected
        sections run, but that this build or machine lacks: (peer, why)."""
        out = []
        for key in SETUP_PEERS:
            peer = PEERS[key]
            if not only.intersection(peer["sections"]):
                continue
            why = []
            absent = [p for p in peer["progs"] if not self.prog(p)]
            if absent:
                why.append("%s not built in %s" % (", ".join(absent),
                                                   self.build))
            if key == "mpi" and not which_first(OPENMPI_RUN):
                why.append("mpirun.openmpi not on PATH")
            if key == "mpich" and not which_first(MPICH_RUN):
                why.append("mpirun.mpich not on PATH")
            if key == "torch" and not self.have_torch():
                why.append("torch is not importable by /usr/bin/python3")
            if not why:
                continue
            inst = package_installed(peer["package"])
            if inst and absent:
                hint = ("%s is installed: the build was configured before "
                        "it was; run sh scripts/build.sh %s (it reconfigures "
                        "and detects it)" % (peer["package"], self.build))
            elif inst:
                hint = "%s is installed" % peer["package"]
            else:
                hint = ("%s is not installed: run sh scripts/setup.sh --perf, "
                        "then sh scripts/build.sh %s" % (peer["package"],
                                                         self.build))
            out.append((peer["name"], "; ".join(why) + " (" + hint + ")"))
        return out

    # ---- machine --------------------------------------------------------
    def machine_info(self, only=SECTIONS_WITH_TORCH):
        m = {}
        lscpu = sh(["lscpu"])
        for line in lscpu.splitlines():
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k in ("Model name", "CPU(s)", "Thread(s) per core",
                     "Core(s) per socket", "Socket(s)", "NUMA node(s)",
                     "L3 cache", "CPU max MHz"):
                m[k] = v
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemTotal:"):
                        m["MemTotal"] = "%.1f GiB" % (
                            int(line.split()[1]) / (1 << 20))
        except OSError:
            pass
        m["kernel"] = platform.release()
        m["nproc"] = self.ncpu
        m["hostname"] = platform.node()
        m["date"] = datetime.datetime.now().isoformat(timespec="seconds")
        m["loadavg_start"] = os.getloadavg()
        m["compiler"] = sh(["cc", "--version"]).splitlines()[0:1]
        m["openmpi"] = (sh([which_first(OPENMPI_RUN) or "mpirun",
                            "--allow-run-as-root", "--version"])
                        .splitlines() or [""])[0]
        gloo_h = "/usr/include/gloo/config.h"
        if os.path.exists(gloo_h):
            with open(gloo_h) as f:
                v = dict(re.findall(r"#define GLOO_VERSION_(\w+) (\d+)",
                                    f.read()))
            m["gloo"] = "%s.%s.%s" % (v.get("MAJOR"), v.get("MINOR"),
                                      v.get("PATCH"))
        m["grpc++"] = sh(["pkg-config", "--modversion", "grpc++"])
        m["protobuf"] = sh(["pkg-config", "--modversion", "protobuf"])
        # importing torch takes seconds: only when a section runs it
        m["torch"] = "not used"
        if set(only) & SECTIONS_WITH_TORCH:
            m["torch"] = sh([sys.executable, "-c",
                             "import torch; print(torch.__version__)"], 60)
        self.machine = m
        log("== machine")
        for k in ("Model name", "nproc", "MemTotal", "kernel", "openmpi",
                  "gloo", "grpc++", "torch", "loadavg_start"):
            log("   %-14s %s" % (k, m.get(k, "?")))

    # ---- memcpy ---------------------------------------------------------
    def memcpy(self):
        exe = self.prog("perf/memcpy_bw")
        for th in sorted({1, self.ncpu}):
            job = Job("memcpy_t%d" % th, "memcpy / STREAM, %d thread(s)" % th,
                      "memcpy", "memcpy", "memcpy")
            if not exe:
                self.skip(job, "perf/memcpy_bw not built")
                continue
            jp = os.path.join(self.out, job.key + ".json")
            self.run(job, [exe, "--size", self.mode["memcpy_size"],
                           "--min-size", "1M", "--iters",
                           str(self.mode["memcpy_iters"]), "--threads",
                           str(th), "--json", jp], json_path=jp)

    # ---- p2p ------------------------------------------------------------
    def zcrun_cmd(self, np_):
        zcrun = self.prog("launcher/zcrun")
        if not zcrun:
            return None
        cmd = [zcrun, "-np", str(np_), "--no-tag-output"]
        if np_ > self.ncpu:
            cmd += ["--oversubscribe"]
        return cmd

    def mpirun_cmd(self, np_):
        mpirun = which_first(OPENMPI_RUN)
        if not mpirun:
            return None
        bind = "core" if np_ <= self.ncpu else "none"
        return [mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
                str(np_), "--bind-to", bind]

    def per_rep(self, n):
        """Iterations per repetition: zcomm's programs repeat their timed
        loop (min/median/max), with the peers' total iteration count."""
        return str(max(1, -(-int(n) // self.mode["reps"])))

    def p2p(self):
        md = self.mode
        common = ["--max-size", md["p2p_max"], "--iters", str(md["p2p_iters"]),
                  "--bw-iters", str(md["p2p_bw_iters"]), "--min-iters",
                  str(md["p2p_min_iters"])]
        # zc_p2p: osu_latency and osu_bw (bibw has no peer here); the peers'
        # iterations split into repetitions
        zc_common = ["--max-size", md["p2p_max"], "--iters",
                     self.per_rep(md["p2p_iters"]), "--bw-iters",
                     self.per_rep(md["p2p_bw_iters"]), "--min-iters",
                     self.per_rep(md["p2p_min_iters"]), "--reps",
                     str(md["reps"]), "-t", "latency,bw"]
        zc = self.prog("perf/zc_p2p")
        for transport in ("shm", "tcp"):
            for mode in ("zerocopy", "copy"):
                key = "p2p_zcomm_%s_%s" % (transport, mode)
                job = Job(key, "p2p zcomm %s %s" % (transport, mode), "p2p",
                          "zcomm %s %s" % (transport, mode), "p2p")
                zcrun = self.zcrun_cmd(2)
                if not zc:
                    self.skip(job, "perf/zc_p2p not built")
                    continue
                if not zcrun:
                    self.skip(job, "launcher/zcrun not built")
                    continue
                jp = os.path.join(self.out, key + ".json")
                self.run(job, zcrun + ["-x", "ZC_TRANSPORT", zc] + zc_common +
                         ["--mode", mode, "--json", jp],
                         env={"ZC_TRANSPORT": transport}, json_path=jp)
        job = Job("p2p_mpi", "p2p Open MPI ping-pong", "p2p", "mpi", "p2p")
        exe, mr = self.prog("perf/peers/mpi_pingpong"), self.mpirun_cmd(2)
        if not exe or not mr:
            self.skip(job, "perf/peers/mpi_pingpong not built" if not exe
                      else "mpirun not found")
        else:
            jp = os.path.join(self.out, job.key + ".json")
            self.run(job, mr + [exe] + common + ["--json", jp], json_path=jp)
        job = Job("p2p_grpc", "p2p gRPC (tensor as protobuf bytes)", "p2p",
                  "grpc", "p2p")
        exe = self.prog("perf/peers/grpc_tensor/grpc_tensor_bench")
        if not exe:
            self.skip(job, "perf/peers/grpc_tensor/grpc_tensor_bench not built")
        else:
            jp = os.path.join(self.out, job.key + ".json")
            self.run(job, [exe, "--min-size", "1K", "--max-size",
                           md["grpc_max"], "--iters", str(md["grpc_iters"]),
                           "--bw-iters", str(md["grpc_bw_iters"]),
                           "--min-iters", str(md["p2p_min_iters"]),
                           "--json", jp], json_path=jp)

    # ---- tcp p2p against a plain loopback socket --------------------------
    def tcpsock(self):
        """zc_p2p's one-way latency over tcp against perf/socket_pingpong,
        the plain loopback socket transfer of the same bytes, in rounds (the
        socket, then zcomm): each ratio divides zcomm's time by the socket's
        of its own round."""
        md = self.mode
        sock, zc = self.prog("perf/socket_pingpong"), self.prog("perf/zc_p2p")
        zcrun = self.zcrun_cmd(2)
        sizes = ["-b", md["tcpsock_min"], "-e", md["tcpsock_max"]]
        iters = ["-n", str(md["tcpsock_iters"]), "--min-iters",
                 str(max(1, md["tcpsock_iters"] // 20)), "--reps", "3"]
        for rnd in range(md["tcpsock_rounds"]):
            for lib in ("socket", "zcomm tcp"):
                key = "tcpsock_%s_r%d" % (lib.replace(" ", "_"), rnd)
                job = Job(key, "tcp p2p against a loopback socket, round %d: "
                          "%s" % (rnd + 1, lib), "tcpsock", lib, "tcpsock")
                job.rep = rnd
                jp = os.path.join(self.out, key + ".json")
                if lib == "socket":
                    if not sock:
                        self.skip(job, "perf/socket_pingpong not built")
                        continue
                    self.run(job, [sock] + sizes + iters + ["--json", jp],
                             json_path=jp)
                    continue
                if not zc or not zcrun:
                    self.skip(job, "perf/zc_p2p or launcher/zcrun not built")
                    continue
                self.run(job, zcrun + ["-x", "ZC_TRANSPORT", zc] + sizes +
                         iters + ["-t", "latency", "--json", jp],
                         env={"ZC_TRANSPORT": "tcp"}, json_path=jp)

    # ---- allreduce ------------------------------------------------------
    def allreduce(self, np_, max_size):
        md = self.mode
        group = "allreduce%d" % np_
        sweep = ["-b", md["coll_min"], "-e", max_size, "-f", "2",
                 "-n", str(md["coll_iters"]), "--min-iters",
                 str(md["coll_min_iters"])]
        # zc_coll: out-of-place and in-place, the peers' iterations split
        # into repetitions; its JSON's time_us is the slowest rank's, as the
        # peers report
        zc_sweep = ["-b", md["coll_min"], "-e", max_size, "-f", "2",
                    "-n", self.per_rep(md["coll_iters"]), "--min-iters",
                    self.per_rep(md["coll_min_iters"]), "--reps",
                    str(md["reps"])]
        oversub = " (oversubscribed)" if np_ > self.ncpu else ""
        zc = self.prog("perf/zc_coll")
        for transport in ("auto", "tcp"):
            key = "%s_zcomm_%s" % (group, transport)
            job = Job(key, "allreduce %d ranks%s: zcomm ZC_TRANSPORT=%s" % (
                np_, oversub, transport), group, "zcomm " + transport, "coll")
            zcrun = self.zcrun_cmd(np_)
            if not zc:
                self.skip(job, "perf/zc_coll not built")
                continue
            if not zcrun:
                self.skip(job, "launcher/zcrun not built")
                continue
            jp = os.path.join(self.out, key + ".json")
            env = {"ZC_TRANSPORT": transport}
            self.run(job, zcrun + ["-x", "ZC_TRANSPORT", zc] + zc_sweep +
                     ["--json", jp], env=env, json_path=jp)
        # Open MPI
        job = Job(group + "_mpi", "allreduce %d ranks%s: MPI_Allreduce" % (
            np_, oversub), group, "mpi", "coll")
        exe, mr = self.prog("perf/peers/mpi_allreduce"), self.mpirun_cmd(np_)
        if not exe or not mr:
            self.skip(job, "perf/peers/mpi_allreduce not built" if not exe
                      else "mpirun not found")
        else:
            jp = os.path.join(self.out, job.key + ".json")
            self.run(job, mr + [exe] + sweep + ["--json", jp], json_path=jp)
        # Gloo: AllreduceRing (whole buffers around the ring) and
        # AllreduceRingChunked (reduce-scatter + allgather). gloo::allreduce,
        # the API torch.distributed calls, is measured through torch below
        # (gloo_allreduce --algo allreduce runs it directly; see
        # docs/PERFORMANCE.md for why it is not in the default suite).
        exe = self.prog("perf/peers/gloo_allreduce")
        for algo, lib, what in (
                ("ring", "gloo ring", "AllreduceRing"),
                ("ring_chunked", "gloo ring_chunked", "AllreduceRingChunked")):
            key = "%s_gloo_%s" % (group, algo)
            job = Job(key, "allreduce %d ranks%s: Gloo %s" % (
                np_, oversub, what), group, lib, "coll")
            if not exe:
                self.skip(job, "perf/peers/gloo_allreduce not built")
                continue
            jp = os.path.join(self.out, key + ".json")
            store = tempfile.mkdtemp(prefix="zcperf-gloo-")
            try:
                cmds = [[exe, "--rank", str(r), "--size", str(np_),
                         "--store", store, "--prefix", key, "--algo", algo,
                         "--timeout-s", str(self.timeout)] + sweep +
                        (["--json", jp] if r == 0 else [])
                        for r in range(np_)]
                self.run_multi(job, cmds, jp)
            finally:
                shutil.rmtree(store, ignore_errors=True)
        # torch.distributed, backend gloo
        job = Job(group + "_torch", "allreduce %d ranks%s: torch.distributed "
                  "gloo" % (np_, oversub), group, "torch-gloo", "coll")
        script = os.path.join(PERF_DIR, "peers", "torch_allreduce.py")
        jp = os.path.join(self.out, job.key + ".json")
        if not self.have_torch():
            self.skip(job, "torch is not importable by /usr/bin/python3 "
                      "(python3-torch missing?)")
            return
        self.run(job, ["/usr/bin/python3", script, "-np", str(np_)] + sweep +
                 ["--timeout-s", str(self.timeout), "--json", jp],
                 json_path=jp)

    # ---- the strongest MPI -------------------------------------------------
    def mpi_variants(self, np_):
        """(library, launcher command, program kind) of every MPI to
        compare; kind "mpi" or "mpich" selects the program build."""
        out = []
        ompi = self.mpirun_cmd(np_)
        if ompi:
            out += [("Open MPI", ompi, "mpi"),
                    ("Open MPI han", ompi + ["--mca", "coll_han_priority",
                                             "100"], "mpi"),
                    ("Open MPI adapt", ompi + ["--mca", "coll_adapt_priority",
                                               "100"], "mpi")]
        mpich = which_first(MPICH_RUN)
        if mpich:
            bind = ["-bind-to", "core"] if np_ <= self.ncpu else []
            out.append(("MPICH", [mpich, "-np", str(np_)] + bind, "mpich"))
        return out

    def bestmpi(self, np_list):
        """Rounds of zcomm and every MPI back to back: allreduce on each rank
        count, then p2p latency. Each ratio divides zcomm's time by the best
        MPI's of the same round (this VM's speed phases last minutes)."""
        md = self.mode
        sweep = ["-b", "8", "-e", md["best_max"], "-f", "2", "-n",
                 str(md["coll_iters"]), "--min-iters", str(md["coll_min_iters"])]
        p2p = ["--max-size", "4K", "--iters", str(md["best_p2p_iters"])]
        zc_coll, zc_p2p = self.prog("perf/zc_coll"), self.prog("perf/zc_p2p")
        for rnd in range(self.a.best_rounds or md["best_rounds"]):
            for np_ in np_list:
                group = "bestmpi_ar%d" % np_
                jobs = [("zcomm", self.zcrun_cmd(np_), zc_coll,
                         sweep + ["--reps", "1"])]
                for lib, run, kind in self.mpi_variants(np_):
                    jobs.append((lib, run, self.prog(
                        "perf/peers/%s_allreduce" % kind), sweep))
                self.best_round(group, "allreduce %d ranks" % np_, rnd, jobs)
            jobs = [("zcomm", self.zcrun_cmd(2), zc_p2p,
                     p2p + ["-t", "latency", "--reps", "1"])]
            for lib, run, kind in self.mpi_variants(2):
                if lib == "Open MPI" or lib == "MPICH":  # no collectives here
                    jobs.append((lib, run, self.prog(
                        "perf/peers/%s_pingpong" % kind), p2p + ["--bw-iters",
                                                                 "1"]))
            # A p2p job takes a fraction of a second, far less than one of
            # the VM's speed phases: several rounds of it per allreduce
            # round (each in the other order) give its median enough pairs
            # for about the price of one allreduce job.
            reps = md["best_p2p_repeats"]
            for k in range(reps):
                self.best_round("bestmpi_p2p", "p2p latency", rnd * reps + k,
                                jobs)

    def best_round(self, group, what, rnd, jobs):
        # Odd rounds run the libraries in reverse order, so that none is
        # always the one right after another job (this VM's speed phases
        # and the host's catching up after an oversubscribed job last
        # seconds).
        for lib, run, exe, args in (jobs if rnd % 2 == 0 else jobs[::-1]):
            key = "%s_%s_r%d" % (group, re.sub(r"\W+", "_", lib), rnd)
            job = Job(key, "%s, round %d: %s" % (what, rnd + 1, lib), group,
                      lib, "bestmpi")
            job.rep = rnd
            if not exe or not run:
                self.skip(job, "program or launcher not built/found")
                continue
            jp = os.path.join(self.out, key + ".json")
            self.run(job, run + [exe] + args + ["--json", jp], json_path=jp)

    # ---- the machine's own limit ------------------------------------------
    def limit(self, np_):
        """zcomm's allreduce against the ideal allreduce of this machine.

        Each round runs perf/ideal_allreduce (out of place, then in place)
        and then zc_coll on zc_mem_alloc buffers and on malloc'd memory, back
        to back: this VM's speed phases last minutes, so every ratio divides
        a zcomm time by the ideal of its own round."""
        md = self.mode
        group = "limit%d" % np_
        ideal, zc = self.prog("perf/ideal_allreduce"), self.prog("perf/zc_coll")
        zcrun = self.zcrun_cmd(np_)
        sizes = ["-b", md["limit_min"], "-e", md["limit_max"]]
        iters = str(md["limit_iters"])
        for rnd in range(md["limit_rounds"]):
            for what, label in (("ideal", "ideal, out of place"),
                                ("ideal_ip", "ideal, in place"),
                                ("zc", "zcomm, zc_mem_alloc buffers"),
                                ("malloc", "zcomm, malloc'd buffers")):
                key = "%s_%s_r%d" % (group, what, rnd)
                lib = what if what.startswith("ideal") else "zcomm " + what
                job = Job(key, "limit %d ranks, round %d: %s" % (
                    np_, rnd + 1, label), group, lib, "limit")
                job.rep = rnd
                jp = os.path.join(self.out, key + ".json")
                if what.startswith("ideal"):
                    if not ideal:
                        self.skip(job, "perf/ideal_allreduce not built")
                        continue
                    # The statistic zc_coll reports below: the mean per
                    # call, median of 3 repetitions.
                    self.run(job, [ideal, "--ranks", str(np_)] + sizes +
                             ["-n", iters, "--reps", "3", "--json", jp] +
                             (["--inplace"] if what == "ideal_ip" else []),
                             json_path=jp)
                    continue
                if not zc or not zcrun:
                    self.skip(job, "perf/zc_coll or launcher/zcrun not built")
                    continue
                self.run(job, zcrun + [zc] + sizes + [
                    "-f", "2", "-n", iters, "--reps", "3", "--buffers", what,
                    "--json", jp], json_path=jp)

    # ---- parameter server (Table 2) --------------------------------------
    def ps(self):
        """zcomm PS (shm, tcp) vs gRPC PS vs zcomm allreduce, per model.

        Two placements as the paper: 2 workers with 2 co-located servers, and
        3 workers + 1 server-only rank. The three programs run in turn
        (shm, tcp, gRPC), the whole round repeated ps_reps times, so that
        every ratio compares runs taken next to each other in time."""
        md = self.mode
        models = self.a.ps_models or md["ps_models"]
        reps = self.a.ps_reps or md["ps_reps"]
        steps = str(md["ps_steps"])
        zc = self.prog("perf/zc_ps_train")
        gp = self.prog("perf/peers/grpc_ps/grpc_ps_train")
        for cfg, workers, servers, coloc in (("2w2s", 2, 2, True),
                                             ("3w1s", 3, 1, False)):
            group = "ps_" + cfg
            what = ("%d workers + %d co-located servers" % (workers, servers)
                    if coloc else "%d workers + %d server" % (workers,
                                                               servers))
            for rep in range(reps):
                for lib in ("zcomm shm", "zcomm tcp", "grpc"):
                    tag = lib.replace(" ", "_")
                    key = "%s_%s_r%d" % (group, tag, rep)
                    job = Job(key, "PS %s, %s, rep %d/%d" % (
                        what, lib, rep + 1, reps), group, lib, "ps")
                    job.rep = rep
                    jp = os.path.join(self.out, key + ".json")
                    if lib == "grpc":
                        if not gp:
                            self.skip(job, "perf/peers/grpc_ps/grpc_ps_train "
                                      "not built (gRPC missing?)")
                            continue
                        cmd = [gp, "--workers", str(workers), "--servers",
                               str(servers), "--models", models, "--steps",
                               steps, "--timeout-s", str(self.timeout),
                               "--json", jp]
                        if coloc:
                            cmd.append("--colocated")
                        self.run(job, cmd, json_path=jp)
                        continue
                    np_ = workers if coloc else workers + servers
                    zcrun = self.zcrun_cmd(np_)
                    if not zc or not zcrun:
                        self.skip(job, "perf/zc_ps_train not built" if not zc
                                  else "launcher/zcrun not built")
                        continue
                    transport = lib.split()[1]
                    cmd = zcrun + ["-x", "ZC_TRANSPORT", "-x",
                                   "ZC_SOCKET_IFNAME", zc, "--models", models,
                                   "--steps", steps, "--json", jp]
                    if not coloc:
                        cmd += ["--servers", str(servers)]
                    self.run(job, cmd, env={"ZC_TRANSPORT": transport},
                             json_path=jp)

    # ---- engine ---------------------------------------------------------
    def engine(self):
        """perf/zc_engine, repeated: each run compares the engine's
        configurations with the baseline within about a second; the
        repetitions give min/median/max of each."""
        exe = self.prog("perf/zc_engine")
        np_ = 2
        for rep in range(self.mode["engine_reps"]):
            key = "engine_np%d_r%d" % (np_, rep)
            job = Job(key, "engine %d ranks: 128 tensors of 1 KiB per step, "
                      "fusion/cycle time vs one zc_allreduce per tensor, "
                      "rep %d/%d" % (np_, rep + 1, self.mode["engine_reps"]),
                      "engine", "zcomm", "engine")
            job.rep = rep
            zcrun = self.zcrun_cmd(np_)
            if not exe or not zcrun:
                self.skip(job, "perf/zc_engine not built" if not exe
                          else "launcher/zcrun not built")
                continue
            self.run(job, zcrun + [exe, "--tensors", "128", "--elems", "256",
                                   "--steps", str(self.mode["engine_steps"])],
                     parser=parse_engine)
            if not job.error and len(job.rows) != 6:
                job.error = "expected 6 result lines, got %d" % len(job.rows)

    # ---- communicator creation -----------------------------------------
    def comm_init(self):
        """perf/zc_comm_init per rank count, shm and tcp in turn."""
        exe = self.prog("perf/zc_comm_init")
        for np_ in (2, 3, 4, 5):
            for transport in ("shm", "tcp"):
                key = "comm_init_np%d_%s" % (np_, transport)
                job = Job(key, "communicator creation (init_rank, split, "
                          "dup), %d ranks, ZC_TRANSPORT=%s" % (np_, transport),
                          "comm_init", "zcomm " + transport, "comm_init")
                if not exe:
                    self.skip(job, "perf/zc_comm_init not built")
                    continue
                self.run(job, [exe, "--np", str(np_), "--reps",
                               str(self.mode["init_reps"])],
                         env={"ZC_TRANSPORT": transport},
                         parser=parse_comm_init)
                if not job.error and len(job.rows) != 3:
                    job.error = "expected 3 result lines, got %d" % len(
                        job.rows)

    # ---- torch.distributed backend and Horovod API ----------------------
    def python_env(self):
        """Environment of the zcomm.torch benchmarks: the build's Python
        package, loopback only."""
        py = os.path.join(self.build, "python")
        return {"PYTHONPATH": py + (os.pathsep + os.environ["PYTHONPATH"]
                                    if os.environ.get("PYTHONPATH") else ""),
                "ZC_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo",
                "ZCRUN": os.path.join(self.build, "launcher", "zcrun")}

    def torch_bench(self):
        """perf/torch_zcomm_bench.py, one job per rank count: all_reduce per
        size and DDP throughput, zcomm and gloo in alternating pairs."""
        script = os.path.join(PERF_DIR, "torch_zcomm_bench.py")
        tmo = int(self.mode["torch_timeout"] * self.a.timeout_scale)
        for np_ in self.mode["torch_ranks"]:
            key = "torch_np%d" % np_
            label = ("torch.distributed %d ranks%s: all_reduce and DDP, "
                     "zcomm vs gloo" % (np_, " (oversubscribed)"
                                        if np_ > self.ncpu else ""))
            if not self.have_torch():
                self.skip(Job(key, label, "torch", "torch", "torch"),
                          "torch is not importable by /usr/bin/python3 "
                          "(python3-torch missing?)")
                continue
            job = Job(key, label, "torch", "zcomm.torch", "torch")
            jp = os.path.join(self.out, key + ".json")
            if os.path.exists(jp):
                os.unlink(jp)
            self.run(job, ["/usr/bin/python3", script, "--ranks", str(np_),
                           "--json", jp] + self.mode["torch_args"],
                     env=self.python_env(), parser=lambda _: parse_torch(jp),
                     timeout=tmo)
            # async_op=True then wait(), the small sizes, every op
            key = "torch_async_np%d" % np_
            job = Job(key, "torch.distributed %d ranks: async_op=True, "
                      "zcomm vs gloo" % np_, "torch", "zcomm.torch", "torch")
            jpa = os.path.join(self.out, key + ".json")
            self.run(job, ["/usr/bin/python3", script, "--ranks", str(np_),
                           "--async", "--no-ddp", "--ops",
                           "all_reduce,broadcast,all_gather", "--json", jpa]
                     + self.mode["torch_async_args"], env=self.python_env(),
                     parser=lambda _, jpa=jpa: parse_torch(jpa), timeout=tmo)
        self.exposed_bench(tmo)

    def exposed_bench(self, tmo):
        """perf/exposed_comm_bench.py under zcrun, 2 ranks: what DDP (zcomm,
        gloo) and the engine add to a training step."""
        key = "torch_exposed_np2"
        job = Job(key, "DDP exposed communication time, 2 ranks: zcomm, "
                  "gloo, engine", "torch", "zcomm.torch exposed", "torch")
        zcrun = self.zcrun_cmd(2)
        if not zcrun:
            self.skip(job, "launcher/zcrun not built", missing=False)
            return
        jp = os.path.join(self.out, key + ".json")
        if os.path.exists(jp):
            os.unlink(jp)
        self.run(job, zcrun + ["/usr/bin/python3", os.path.join(
            PERF_DIR, "exposed_comm_bench.py"), "--json", jp] +
            self.mode["exposed_args"], env=self.python_env(),
            parser=lambda _: parse_exposed(jp), timeout=tmo)

    def recovery_bench(self):
        """perf/recovery_bench.py: shrink vs restart-and-reload after a
        SIGKILL, 4 ranks, shm and tcp. Exit 77: torch is missing."""
        job = Job("recovery", "recovery after a lost rank, 4 ranks: "
                  "hvd.elastic shrink vs restart + checkpoint reload",
                  "recovery", "zcomm.torch elastic", "recovery")
        if not self.prog("launcher/zcrun"):
            self.skip(job, "launcher/zcrun not built", missing=False)
            return
        jp = os.path.join(self.out, "recovery.json")
        if os.path.exists(jp):
            os.unlink(jp)
        tmo = int(self.mode["torch_timeout"] * 2 * self.a.timeout_scale)
        self.run(job, ["/usr/bin/python3", os.path.join(PERF_DIR, "recovery_bench.py"),
                       "--json", jp, "--rounds", str(self.mode["recovery_rounds"]),
                       "--transports", "shm,tcp", "--models", self.mode["recovery_models"]],
                 env=self.python_env(),
                 parser=lambda _: parse_recovery(jp), timeout=tmo)
        if job.error and job.error.startswith("exit code 77"):
            job.error = ("torch is not importable by /usr/bin/python3 "
                         "(python3-torch missing?)")

    def hvd_bench(self):
        """perf/hvd_bench.py, one job per rank count: engine vs DDP-gloo
        throughput, the engine's per-step overhead with and without fusion.
        Exit 77: torch is missing."""
        script = os.path.join(PERF_DIR, "hvd_bench.py")
        tmo = int(self.mode["torch_timeout"] * self.a.timeout_scale)
        for np_ in self.mode["hvd_ranks"]:
            key = "hvd_np%d" % np_
            job = Job(key, "Horovod API %d ranks%s: engine vs DDP-gloo, "
                      "overhead with/without fusion" % (
                          np_, " (oversubscribed)" if np_ > self.ncpu
                          else ""), "hvd", "zcomm.torch hvd", "hvd")
            if not self.prog("launcher/zcrun"):
                self.skip(job, "launcher/zcrun not built", missing=False)
                continue
            self.run(job, ["/usr/bin/python3", script, "--ranks", str(np_)]
                     + self.mode["hvd_args"], env=self.python_env(),
                     parser=parse_hvd, timeout=tmo)
            if job.error and job.error.startswith("exit code 77"):
                job.error = ("torch is not importable by /usr/bin/python3 "
                             "(python3-torch missing?)")
                job.missing, job.library = True, "torch (hvd_bench)"
            elif not job.error and not (
                    any(r["what"] == "throughput" for r in job.rows) and
                    sum(r["what"] == "overhead" for r in job.rows) == 2):
                job.error = "expected throughput and 2 overhead lines"

    # ---- reporting ------------------------------------------------------
    def group_jobs(self, group):
        return [j for j in self.jobs if j.group == group]


def fmt(v, digits=2):
    if v is None:
        return "-"
    if v >= 1e5:
        return "%.0f" % v
    return ("%." + str(digits) + "f") % v


def rows_by_size(job, field):
    return {r["size"]: r.get(field) for r in job.rows if r.get(field)
            is not None}


def table(title, jobs, field, ratio_pairs, digits=2, unit=""):
    """Returns (text, markdown) of one size x library table with ratios."""
    sizes = sorted({r["size"] for j in jobs for r in j.rows})
    ok = [j for j in jobs if j.rows]
    data = {j.library: rows_by_size(j, field) for j in ok}
    wrong = {j.library: {r["size"] for r in j.rows if (r.get("wrong") or 0)
                         > 0} for j in ok}
    pairs = [(a, b) for a, b in ratio_pairs if a in data and b in data]
    heads = ["size"] + [j.library for j in ok] + \
        ["%s / %s" % (a, b) for a, b in pairs]
    out = []
    for s in sizes:
        row = [human(s)]
        for j in ok:
            v = data[j.library].get(s)
            row.append(fmt(v, digits) + ("!" if s in wrong[j.library]
                                         else ""))
        for a, b in pairs:
            va, vb = data[a].get(s), data[b].get(s)
            row.append("%.2f" % (va / vb) if va and vb else "-")
        out.append(row)
    widths = [max(len(h), *(len(r[i]) for r in out)) if out else len(h)
              for i, h in enumerate(heads)]
    text = ["", "### %s%s" % (title, (" [%s]" % unit) if unit else "")]
    text.append("  ".join(h.rjust(w) for h, w in zip(heads, widths)))
    for r in out:
        text.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    for j in jobs:
        if j.error:
            text.append("  %s: n/a: %s" % (j.library, j.error))
    md = ["", "#### %s%s" % (title, (" (%s)" % unit) if unit else ""), ""]
    md.append("| " + " | ".join(heads) + " |")
    md.append("|" + "|".join("---:" for _ in heads) + "|")
    for r in out:
        md.append("| " + " | ".join(r) + " |")
    na = [j for j in jobs if j.error]
    if na:
        md.append("")
        for j in na:
            md.append("- %s: n/a: %s" % (j.library, j.error.replace("|", "/")))
    return "\n".join(text), "\n".join(md)

def parse_engine(path):
    """perf/zc_engine's lines: the baseline and one per configuration."""
    rows = []
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return rows
    m = re.search(r"baseline \(zc_allreduce per tensor\)\s+step\s+([\d.]+) ms",
                  text)
    if m:
        rows.append(dict(config="baseline: zc_allreduce per tensor",
                         fusion=None, cycle_ms=None,
                         step_ms=float(m.group(1)), vs_baseline=1.0))
    for m in re.finditer(
            r"fusion (\S+)\s+cycle (\S+)\s+ms\s+step\s+([\d.]+) ms \(([\d.]+)x "
            r"baseline\) \| per step: ([\d.]+) cycles, ([\d.]+) cache hits, "
            r"([\d.]+) fused sets, ([\d.]+) data collectives \| ([\d.]+) "
            r"negotiation collectives per cycle", text):
        rows.append(dict(
            config="engine, ZC_FUSION_THRESHOLD=%s ZC_CYCLE_TIME=%s" % (
                m.group(1), m.group(2)),
            fusion=m.group(1), cycle_ms=float(m.group(2)),
            step_ms=float(m.group(3)), vs_baseline=float(m.group(4)),
            cycles=float(m.group(5)), cache_hits=float(m.group(6)),
            fused_sets=float(m.group(7)), data_colls=float(m.group(8)),
            negotiation_per_cycle=float(m.group(9))))
    return rows


def parse_torch(jp):
    """perf/torch_zcomm_bench.py's JSON: one row per all_reduce size (times
    in us, per pair) and one per DDP model (samples/s, per pair)."""
    data = load_json(jp)
    rows = []
    for res in data or []:
        n = res["ranks"]
        ops = res.get("ops") or {"all_reduce": res.get("allreduce", [])}
        for op, op_rows in ops.items():
            for r in op_rows:
                rows.append(dict(what="op", op=op, ranks=n, size=r["bytes"],
                                 async_op=bool(res.get("async")),
                                 zcomm_us=[x * 1e6 for x in r["zcomm"]],
                                 gloo_us=[x * 1e6 for x in r["gloo"]]))
        for d in res.get("ddp", []):
            rows.append(dict(what="ddp", ranks=n, model=d["model"],
                             params=d["params"],
                             batch_per_rank=d["batch_per_rank"],
                             zcomm=d["zcomm"], gloo=d["gloo"]))
    return rows


def parse_exposed(jp):
    """perf/exposed_comm_bench.py's JSON: per model, the rounds' median step
    of each variant (seconds)."""
    rows = []
    for m in load_json(jp) or []:
        rows.append(dict(what="exposed", model=m["model"], params=m["params"],
                         ranks=m["ranks"], batch_per_rank=m["batch_per_rank"],
                         rounds=m["rounds"]))
    return rows


def parse_recovery(jp):
    """perf/recovery_bench.py's JSON: per transport, every round's shrink and
    restart time (ms)."""
    doc = load_json(jp)
    if not doc or not doc.get("complete"):
        return []
    models = doc.get("models") or {"": dict(transports=doc["transports"])}
    return [dict(what="recovery", model=name, transport=t, ranks=doc["ranks"],
                 shrink_ms=v["shrink_ms"], restart_ms=v["restart_ms"],
                 ratio=v["ratio"], phases_ms=v.get("phases_ms", []))
            for name, m in models.items() for t, v in sorted(m["transports"].items())]


def parse_hvd(path):
    """perf/hvd_bench.py's summary lines."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    rows = []
    num = r"([\d.]+)"
    mmm_re = r"min\s+%s\s+median\s+%s\s+max\s+%s" % (num, num, num)
    for m in re.finditer(r"np (\d+)\s+engine\s+total img/sec: " + mmm_re,
                         text):
        n = int(m.group(1))
        d = re.search(r"np %d\s+DDP-gloo total img/sec: %s" % (n, mmm_re),
                      text)
        r = re.search(r"np %d\s+engine / DDP-gloo: ([\d.]+) \(median of "
                      r"each; per pair ([\d. ]*)\)" % n, text)
        if not d or not r:
            continue
        rows.append(dict(
            what="throughput", ranks=n,
            engine=tuple(float(m.group(k)) for k in (2, 3, 4)),
            ddp=tuple(float(d.group(k)) for k in (1, 2, 3)),
            ratio=float(r.group(1)),
            pair_ratios=[float(x) for x in r.group(2).split()]))
    for m in re.finditer(
            r"np (\d+)\s+128 tensors/step, fusion (on|off)\s*: step ms " +
            mmm_re + r" \| cycles/step ([\d.]+), negotiation collectives/"
            r"cycle \(max\) ([\d.]+), data collectives/step ([\d.]+)", text):
        rows.append(dict(
            what="overhead", ranks=int(m.group(1)), fusion=m.group(2),
            step_ms=tuple(float(m.group(k)) for k in (3, 4, 5)),
            cycles=float(m.group(6)), negotiation_per_cycle=float(m.group(7)),
            data_colls=float(m.group(8))))
    return rows


def parse_comm_init(path):
    """perf/zc_comm_init's lines: ranks, operation, min, median, max (ms)."""
    rows = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = re.match(r"\s*(\d+)\s+(init_rank|split|dup)\s+([\d.]+)\s+"
                             r"([\d.]+)\s+([\d.]+)\s*$", line)
                if m:
                    rows.append(dict(ranks=int(m.group(1)), op=m.group(2),
                                     min_ms=float(m.group(3)),
                                     median_ms=float(m.group(4)),
                                     max_ms=float(m.group(5))))
    except OSError:
        pass
    return rows


def mmm(vals):
    """(min, median, max) of a list, or None."""
    v = sorted(x for x in vals if x is not None)
    if not v:
        return None
    return (v[0], v[len(v) // 2] if len(v) % 2 else
            (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2.0, v[-1])


def fmt_mmm(t, digits=1):
    if not t:
        return "-"
    f = "%." + str(digits) + "f"
    return (f + " / " + f + " / " + f) % t


def ps_stats(suite, group):
    """Per model: min/median/max over repetitions of each library's median
    step (and push+pull) time, and of the paired ratios (runs of the same
    repetition: taken next to each other)."""
    jobs = [j for j in suite.group_jobs(group) if j.rows and not j.error]
    by = {}  # (model, library, rep) -> row
    models = []
    for j in jobs:
        for r in j.rows:
            by[(r["model"], j.library, j.rep)] = r
            if r["model"] not in models:
                models.append(r["model"])
    reps = sorted({j.rep for j in jobs})
    out = []
    for mname in models:
        e = dict(model=mname)
        for lib in ("zcomm shm", "zcomm tcp", "grpc"):
            rows = [by.get((mname, lib, k)) for k in reps]
            rows = [r for r in rows if r]
            e[lib] = dict(
                n=len(rows),
                step=mmm([r["step_ms_median"] for r in rows]),
                comm=mmm([r["comm_ms_median"] for r in rows]),
                allreduce=mmm([r.get("allreduce_ms_median") for r in rows]),
                ps_over_ar=mmm([r["comm_ms_median"] / r["allreduce_ms_median"]
                                for r in rows
                                if r.get("allreduce_ms_median")]),
                mib=rows[0]["mib"] if rows else None,
                tensors=rows[0]["tensors"] if rows else None,
                compute=rows[0]["compute_ms"] if rows else None)
        for lib in ("zcomm shm", "zcomm tcp"):
            pairs = [(by.get((mname, lib, k)), by.get((mname, "grpc", k)))
                     for k in reps]
            e[lib]["vs_grpc_step"] = mmm([a["step_ms_median"] /
                                          b["step_ms_median"]
                                          for a, b in pairs if a and b])
            e[lib]["vs_grpc_comm"] = mmm([a["comm_ms_median"] /
                                          b["comm_ms_median"]
                                          for a, b in pairs if a and b])
        out.append(e)
    return out


def plots(suite, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        log("plots skipped: cannot import matplotlib: %s" % e)
        return []
    made = []

    def errorbar_mmm(ax, xs, triples, fmt, label):
        # median with whiskers min-max, one (min, median, max) per x
        ax.errorbar(xs, [t[1] for t in triples],
                    yerr=[[t[1] - t[0] for t in triples],
                          [t[2] - t[1] for t in triples]],
                    fmt=fmt, markersize=3, capsize=2, label=label)

    def save(fig, ax, name, legend_size):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=legend_size)
        fig.tight_layout()
        path = os.path.join(out_dir, name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)

    def one(name, jobs, field, ylabel, title, logy=True):
        jobs = [j for j in jobs if j.rows]
        if not jobs:
            return
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        for j in jobs:
            pts = sorted((r["size"], r[field]) for r in j.rows
                         if r.get(field) not in (None, 0))
            if not pts:
                continue
            xs, ys = zip(*pts)
            style = "-o" if j.library.startswith("zcomm") else "--s"
            ax.plot(xs, ys, style, markersize=3, label=j.library)
        ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)

    cpu = suite.machine.get("Model name", "")
    tag = "%s, %s cores" % (cpu, suite.machine.get("nproc", "?"))
    for g in sorted({j.group for j in suite.jobs if j.kind == "coll"}):
        n = g[len("allreduce"):]
        jobs = suite.group_jobs(g)
        one("%s_time.png" % g, jobs, "time_us", "time per allreduce (us)",
            "allreduce float32 sum, %s ranks — %s" % (n, tag))
        one("%s_busbw.png" % g, jobs, "busbw_GBps", "bus bandwidth (GB/s)",
            "allreduce busbw, %s ranks — %s" % (n, tag))
    p2p = suite.group_jobs("p2p")
    one("p2p_latency.png", p2p, "latency_us", "one-way latency (us)",
        "point-to-point latency — %s" % tag)
    one("p2p_bandwidth.png", p2p, "bw_GBps", "bandwidth (GB/s)",
        "point-to-point bandwidth — %s" % tag)
    # torch.distributed all_reduce, zcomm vs gloo per rank count: median,
    # whiskers min-max over the pairs
    ar = [r for j in suite.group_jobs("torch") for r in j.rows
          if r["what"] == "op" and r["op"] == "all_reduce" and
          not r["async_op"]]
    if ar:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        for n in sorted({r["ranks"] for r in ar}):
            rs = sorted((r for r in ar if r["ranks"] == n),
                        key=lambda r: r["size"])
            for lib, style in (("zcomm", "-o"), ("gloo", "--s")):
                st = [mmm(r[lib + "_us"]) for r in rs]
                ax.errorbar([r["size"] for r in rs], [s[1] for s in st],
                            yerr=[[s[1] - s[0] for s in st],
                                  [s[2] - s[1] for s in st]],
                            fmt=style, markersize=3, capsize=2,
                            label="%s, %d ranks" % (lib, n))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("time per dist.all_reduce (us)")
        ax.set_title("torch.distributed all_reduce float32, zcomm vs gloo "
                     "— %s" % tag, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, "torch_allreduce.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    # zcomm / the best MPI at each size (bestmpi_stats), per size: median,
    # whiskers min-max over the rounds.
    best = [(g, bestmpi_stats(suite.group_jobs(g), "latency_us" if
                              g.endswith("p2p") else "time_us")[1])
            for g in sorted({j.group for j in suite.jobs
                             if j.kind == "bestmpi"})]
    best = [(g, st) for g, st in best if st]
    if best:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        for g, st in best:
            pts = [(e["size"], e["ratio"]) for e in st if e["ratio"]]
            label = ("p2p one-way latency" if g.endswith("p2p") else
                     "allreduce, %s ranks" % g[len("bestmpi_ar"):])
            errorbar_mmm(ax, [p[0] for p in pts], [p[1] for p in pts], "-o",
                         label)
        ax.axhline(1.0, color="gray", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("zcomm time / best MPI's time (same round)")
        ax.set_title("zcomm against the best of Open MPI (tuned, han, adapt) "
                     "and MPICH — %s" % tag, fontsize=9)
        save(fig, ax, "zcomm_vs_best_mpi.png", 8)
    # zcomm / ideal per size and rank count: median, whiskers min-max over
    # the rounds.
    lim = [(g, limit_stats(suite.group_jobs(g))) for g in sorted(
        {j.group for j in suite.jobs if j.kind == "limit"})]
    lim = [(g, st) for g, st in lim if st]
    if lim:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        for g, st in lim:
            for key, style, label in (
                    ("zc_oop", "-o", "zc_mem_alloc"),
                    ("zc_ip", "-^", "zc_mem_alloc, in place"),
                    ("malloc_oop", "--s", "malloc"),
                    ("malloc_ip", "--v", "malloc, in place")):
                pts = [(e["size"], e[key]) for e in st if e.get(key)]
                if not pts:
                    continue
                errorbar_mmm(ax, [p[0] for p in pts], [p[1] for p in pts],
                             style, "%s, %s ranks" % (label, g[len("limit"):]))
        ax.axhline(1.0, color="gray", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("zcomm allreduce time / ideal allreduce time")
        ax.set_title("allreduce against this machine's ideal — %s" % tag,
                     fontsize=10)
        save(fig, ax, "allreduce_vs_ideal.png", 7)
    # zcomm tcp / plain socket per size: median, whiskers min-max over the
    # rounds.
    ts = tcpsock_stats(suite.group_jobs("tcpsock"))
    ts = [e for e in ts if e["ratio"]]
    if ts:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        errorbar_mmm(ax, [e["size"] for e in ts], [e["ratio"] for e in ts],
                     "-o", "zcomm tcp / loopback socket, 2 ranks")
        ax.axhline(1.2, color="gray", linewidth=0.8, linestyle="--",
                   label="goal 1.2")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("one-way latency / socket's (same round)")
        ax.set_title("tcp p2p against a plain loopback socket — %s" % tag,
                     fontsize=10)
        save(fig, ax, "tcp_vs_socket.png", 8)
    # PS comparison: push+pull per model and library, allreduce of the same
    # tensors; bars at the median, whiskers min-max over repetitions.
    groups = [(g, w) for g, w in PS_GROUPS if suite.group_jobs(g)]
    stats = [(g, w, ps_stats(suite, g)) for g, w in groups]
    stats = [x for x in stats if x[2]]
    if stats:
        fig, axes = plt.subplots(1, len(stats), figsize=(6.2 * len(stats), 4.6),
                                 squeeze=False)
        series = (("zcomm shm", "comm", "zcomm PS shm"),
                  ("zcomm tcp", "comm", "zcomm PS tcp"),
                  ("grpc", "comm", "gRPC PS"),
                  ("zcomm shm", "allreduce", "zcomm allreduce shm"),
                  ("zcomm tcp", "allreduce", "zcomm allreduce tcp"))
        for ax, (g, what, st) in zip(axes[0], stats):
            width = 0.8 / len(series)
            for i, (lib, field, label) in enumerate(series):
                xs, ys, lo, hi = [], [], [], []
                for k, e in enumerate(st):
                    t = e[lib][field]
                    if not t:
                        continue
                    xs.append(k + (i - (len(series) - 1) / 2.0) * width)
                    ys.append(t[1])
                    lo.append(t[1] - t[0])
                    hi.append(t[2] - t[1])
                if xs:
                    ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2,
                           label=label)
            ax.set_xticks(range(len(st)))
            ax.set_xticklabels([e["model"] for e in st])
            ax.set_yscale("log")
            ax.set_ylabel("push+pull (allreduce) per step (ms)")
            ax.set_title("%s — %s" % (what, tag), fontsize=9)
            ax.grid(True, axis="y", which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(out_dir, "ps_comparison.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    rec = [r for j in suite.group_jobs("recovery") for r in j.rows]
    if rec:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        width = 0.38
        for i, (field, label) in enumerate((("shrink_ms", "hvd.elastic (shrink)"),
                                            ("restart_ms", "restart + checkpoint reload"))):
            st = [mmm(r[field]) for r in rec]
            ax.bar([k + (i - 0.5) * width for k in range(len(rec))], [t[1] for t in st], width,
                   yerr=[[t[1] - t[0] for t in st], [t[2] - t[1] for t in st]], capsize=3,
                   label=label)
        ax.axhline(1000, color="gray", linestyle=":", label="goal: 1 s")
        ax.set_xticks(range(len(rec)))
        ax.set_xticklabels(["%s%s, %d ranks" % (r.get("model") and r["model"] + "\n" or "", r["transport"],
                                                  r["ranks"]) for r in rec])
        ax.set_yscale("log")
        ax.set_ylabel("SIGKILL to next completed step (ms)")
        ax.set_title("recovery after a lost rank (median, min-max) — %s" % tag, fontsize=9)
        save(fig, ax, "recovery.png", 8)
    return made

def md_table(title, heads, rows, notes=()):
    text = ["", "### " + title]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(heads)]
    text.append("  ".join(h.rjust(w) for h, w in zip(heads, widths)))
    for r in rows:
        text.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    md = ["", "#### " + title, "", "| " + " | ".join(heads) + " |",
          "|" + "|".join("---:" if i else "---" for i in range(len(heads)))
          + "|"]
    for r in rows:
        md.append("| " + " | ".join(r) + " |")
    if notes:
        md.append("")
    for n in notes:
        text.append("  " + n)
        md.append("- " + n.replace("|", "/"))
    return "\n".join(text), "\n".join(md)


def med_range(t, digits=1):
    """'median (min-max)' of a (min, median, max) triple."""
    if not t:
        return "-"
    f = "%." + str(digits) + "f"
    return (f + " (" + f + "-" + f + ")") % (t[1], t[0], t[2])


PS_GROUPS = (("ps_2w2s", "2 workers + 2 co-located servers"),
             ("ps_3w1s", "3 workers + 1 server"))


def ps_report(suite):
    texts, mds = [], []
    for group, what in PS_GROUPS:
        jobs = suite.group_jobs(group)
        if not jobs:
            continue
        st = ps_stats(suite, group)
        reps = len({j.rep for j in jobs})
        notes = ["%s: n/a: %s" % (j.label, j.error) for j in jobs
                 if j.error]
        heads = ["model", "MiB", "tensors", "compute", "zcomm shm",
                 "zcomm tcp", "gRPC", "shm / gRPC", "tcp / gRPC"]
        rows = []
        for e in st:
            s0 = e["zcomm shm"]
            rows.append([e["model"], fmt(s0["mib"] or e["grpc"]["mib"], 1),
                         str(s0["tensors"] or e["grpc"]["tensors"] or "-"),
                         fmt(s0["compute"] or e["grpc"]["compute"], 2),
                         med_range(s0["step"]),
                         med_range(e["zcomm tcp"]["step"]),
                         med_range(e["grpc"]["step"]),
                         med_range(s0["vs_grpc_step"], 3),
                         med_range(e["zcomm tcp"]["vs_grpc_step"], 3)])
        t, m = md_table(
            "PS training step, %s: step time in ms, median (min-max) over %d "
            "alternating repetitions" % (what, reps), heads, rows, notes)
        texts.append(t)
        mds.append(m)
        heads = ["model", "push+pull shm", "allreduce shm", "PS/AR shm",
                 "push+pull tcp", "allreduce tcp", "PS/AR tcp",
                 "push+pull gRPC", "shm / gRPC", "tcp / gRPC"]
        rows = []
        for e in st:
            a, b, g = e["zcomm shm"], e["zcomm tcp"], e["grpc"]
            rows.append([e["model"], med_range(a["comm"]),
                         med_range(a["allreduce"]),
                         med_range(a["ps_over_ar"], 2), med_range(b["comm"]),
                         med_range(b["allreduce"]),
                         med_range(b["ps_over_ar"], 2), med_range(g["comm"]),
                         med_range(a["vs_grpc_comm"], 3),
                         med_range(b["vs_grpc_comm"], 3)])
        t, m = md_table(
            "PS communication, %s: push+pull vs allreduce of the same "
            "tensors (ms), median (min-max)" % what, heads, rows)
        texts.append(t)
        mds.append(m)
    return texts, mds


def bestmpi_stats(jobs, field):
    """Per size: each library's median over rounds; the best MPI at that
    size, the MPI with the lowest median; and min/median/max over rounds of
    zcomm / that MPI in the same round. (Not the fastest MPI of each round:
    the least of four runs, each with its own luck in this VM's speed
    phases, is below what any one of them takes.)"""
    rounds = {}
    for j in jobs:
        if j.rows:
            rounds.setdefault(j.rep, {})[j.library] = {
                r["size"]: r.get(field) for r in j.rows}
    libs = sorted({lib for rd in rounds.values() for lib in rd})
    sizes = sorted({s for rd in rounds.values() for lib in rd.values()
                    for s in lib})
    out = []
    for size in sizes:
        e = dict(size=size, ratio=[])
        for lib in libs:
            e[lib] = mmm([rd.get(lib, {}).get(size) for rd in rounds.values()])
        mpis = [(e[lib][1], lib) for lib in libs
                if lib != "zcomm" and e[lib] and e[lib][1]]
        best = min(mpis)[1] if mpis else None
        for rd in rounds.values():
            t = rd.get(best, {}).get(size) if best else None
            z = rd.get("zcomm", {}).get(size)
            if t and z:
                e["ratio"].append(z / t)
        e["ratio"] = mmm(e["ratio"])
        e["best"] = best or "-"
        out.append(e)
    return libs, out


def bestmpi_report(suite):
    texts, mds = [], []
    groups = sorted({j.group for j in suite.jobs if j.kind == "bestmpi"})
    for g in groups:
        jobs = suite.group_jobs(g)
        field = "latency_us" if g.endswith("p2p") else "time_us"
        libs, st = bestmpi_stats(jobs, field)
        others = [lib for lib in libs if lib != "zcomm"]
        heads = ["size", "zcomm (us)"] + ["%s (us)" % lib for lib in others] \
            + ["best MPI", "zcomm / best MPI"]
        rows = []
        for e in st:
            rows.append([human(e["size"]),
                         fmt(e["zcomm"][1] if e.get("zcomm") else None, 2)] +
                        [fmt(e[lib][1] if e.get(lib) else None, 2)
                         for lib in others] +
                        [e["best"], fmt_mmm(e["ratio"], 2)])
        rounds = len({j.rep for j in jobs if j.rows})
        what = ("p2p one-way latency, 2 ranks" if g.endswith("p2p") else
                "allreduce %s ranks, float32 sum" % g[len("bestmpi_ar"):])
        notes = ["%s: n/a: %s" % (j.label, j.error) for j in jobs if j.error]
        t, m = md_table(
            "%s against the best MPI at each size (lowest median): medians "
            "over %d rounds; zcomm / best MPI in the same round, min / median "
            "/ max" % (what, rounds), heads,
            rows, notes)
        texts.append(t)
        mds.append(m)
    return texts, mds


def tcpsock_stats(jobs):
    """Per size: the socket's and zcomm's median one-way latency over the
    rounds, and min/median/max over rounds of zcomm / socket."""
    rounds = {}
    for j in jobs:
        if j.rows:
            rounds.setdefault(j.rep, {})[j.library] = {
                r["size"]: r.get("latency_us") for r in j.rows}
    sizes = sorted({s for rd in rounds.values() for lib in rd.values()
                    for s in lib})
    out = []
    for size in sizes:
        sock = [rd.get("socket", {}).get(size) for rd in rounds.values()]
        zc = [rd.get("zcomm tcp", {}).get(size) for rd in rounds.values()]
        ratio = [z / t for z, t in zip(zc, sock) if z and t]
        out.append(dict(size=size, socket=mmm([t for t in sock if t]),
                        zcomm=mmm([z for z in zc if z]), ratio=mmm(ratio)))
    return out


def tcpsock_report(suite):
    jobs = suite.group_jobs("tcpsock")
    st = tcpsock_stats(jobs)
    if not st:
        return [], []
    rounds = len({j.rep for j in jobs if j.rows})
    heads = ["size", "socket (us)", "zcomm tcp (us)",
             "zcomm / socket", "goal <= 1.2"]
    rows = [[human(e["size"]), fmt(e["socket"][1] if e["socket"] else None, 1),
             fmt(e["zcomm"][1] if e["zcomm"] else None, 1),
             fmt_mmm(e["ratio"], 2),
             ("met" if e["ratio"][1] <= 1.2 else "not met") if e["ratio"]
             else "-"] for e in st]
    notes = ["%s: n/a: %s" % (j.label, j.error) for j in jobs if j.error]
    t, m = md_table(
        "tcp p2p one-way latency against a plain loopback socket transfer "
        "(perf/socket_pingpong): medians over %d rounds; zcomm / socket of "
        "the same round min / median / max" % rounds, heads, rows, notes)
    return [t], [m]


def limit_stats(jobs):
    """Per size: the ideal's median time over rounds, and min/median/max
    over rounds of zcomm's time / the ideal of the same round, for each
    buffer kind and placement."""
    rounds = {}
    for j in jobs:
        if j.rows:
            rounds.setdefault(j.rep, {})[j.library] = {
                r["size"]: r for r in j.rows}
    sizes = sorted({s for rd in rounds.values() for lib in rd.values()
                    for s in lib})
    out = []
    for size in sizes:
        e = dict(size=size, ideal=[], ideal_ip=[])
        for rd in rounds.values():
            oop = rd.get("ideal", {}).get(size, {}).get("best_us")
            ip = rd.get("ideal_ip", {}).get(size, {}).get("best_us")
            e["ideal"].append(oop)
            e["ideal_ip"].append(ip)
            for buf in ("zc", "malloc"):
                r = rd.get("zcomm " + buf, {}).get(size, {})
                for place, ideal in (("oop", oop), ("ip", ip)):
                    t = r.get(place + "_time_us")
                    e.setdefault("%s_%s" % (buf, place), []).append(
                        t / ideal if t and ideal else None)
        out.append({k: (mmm(v) if isinstance(v, list) else v)
                    for k, v in e.items()})
    return out


def limit_report(suite):
    texts, mds = [], []
    for g in sorted({j.group for j in suite.jobs if j.kind == "limit"}):
        jobs = suite.group_jobs(g)
        n = g[len("limit"):]
        rounds = len({j.rep for j in jobs if j.rows})
        heads = ["size", "ideal (us)", "zc_mem_alloc / ideal",
                 "malloc / ideal", "ideal in place (us)",
                 "zc_mem_alloc / ideal, in place",
                 "malloc / ideal, in place"]
        rows = []
        for e in limit_stats(jobs):
            rows.append([human(e["size"]),
                         fmt(e["ideal"][1] if e["ideal"] else None, 0),
                         fmt_mmm(e.get("zc_oop"), 2),
                         fmt_mmm(e.get("malloc_oop"), 2),
                         fmt(e["ideal_ip"][1] if e["ideal_ip"] else None, 0),
                         fmt_mmm(e.get("zc_ip"), 2),
                         fmt_mmm(e.get("malloc_ip"), 2)])
        notes = ["%s: n/a: %s" % (j.label, j.error) for j in jobs if j.error]
        t, m = md_table(
            "allreduce %s ranks against this machine's ideal allreduce "
            "(float32 sum): zcomm time / ideal time of the same round, "
            "min / median / max over %d rounds" % (n, rounds), heads, rows,
            notes)
        texts.append(t)
        mds.append(m)
    return texts, mds


def engine_report(suite):
    jobs = [j for j in suite.group_jobs("engine")]
    if not jobs:
        return [], []
    configs = []
    by = {}
    for j in jobs:
        for r in j.rows:
            if r["config"] not in configs:
                configs.append(r["config"])
            by.setdefault(r["config"], []).append(r)
    heads = ["configuration", "step (ms)", "x baseline", "cycles/step",
             "cache hits/step", "fused sets/step", "data colls/step",
             "negotiation colls/cycle"]
    rows = []
    for c in configs:
        rs = by[c]
        row = [c, med_range(mmm([r["step_ms"] for r in rs]), 3),
               med_range(mmm([r["vs_baseline"] for r in rs]), 2)]
        for k, d in (("cycles", 2), ("cache_hits", 1), ("fused_sets", 2),
                     ("data_colls", 2), ("negotiation_per_cycle", 3)):
            vals = [r.get(k) for r in rs if r.get(k) is not None]
            row.append(med_range(mmm(vals), d) if vals else "-")
        rows.append(row)
    notes = ["%s: n/a: %s" % (j.label, j.error) for j in jobs if j.error]
    n = len([j for j in jobs if j.rows])
    t, m = md_table("engine, 2 ranks, 128 float32 tensors of 1 KiB per step: "
                    "median step of the slowest rank, median (min-max) over "
                    "%d runs" % n, heads, rows, notes)
    return [t], [m]


def comm_init_report(suite):
    jobs = suite.group_jobs("comm_init")
    if not jobs:
        return [], []
    data = {}
    for j in jobs:
        for r in j.rows:
            data[(r["ranks"], r["op"], j.library)] = r
    libs = []
    for j in jobs:
        if j.library not in libs:
            libs.append(j.library)
    heads = ["ranks", "operation"] + ["%s min / median / max (ms)" % l
                                      for l in libs]
    rows = []
    for n in sorted({k[0] for k in data}):
        for op in ("init_rank", "split", "dup"):
            row = [str(n), op]
            for l in libs:
                r = data.get((n, op, l))
                row.append(fmt_mmm((r["min_ms"], r["median_ms"],
                                    r["max_ms"]), 3) if r else "-")
            rows.append(row)
    notes = ["%s: n/a: %s" % (j.label, j.error) for j in jobs if j.error]
    t, m = md_table("communicator creation, slowest rank, %s repetitions"
                    % suite.mode["init_reps"], heads, rows, notes)
    return [t], [m]


def torch_report(suite):
    jobs = suite.group_jobs("torch")
    if not jobs:
        return [], []
    texts, mds = [], []
    notes = ["%s: n/a: %s" % (j.label, j.error) for j in jobs if j.error]
    rows_all = [r for j in jobs for r in j.rows]
    keys = sorted({(r["ranks"], r["op"], r["async_op"]) for r in rows_all
                   if r["what"] == "op"})
    for n, op, async_op in keys:
        ar = [r for r in rows_all if r["what"] == "op" and r["ranks"] == n
              and r["op"] == op and r["async_op"] == async_op]
        heads = ["size", "zcomm (us)", "gloo (us)", "zcomm / gloo",
                 "per pair", "goal <= 0.5 x gloo", "goal <= 15 us (<= 4 KiB)"]
        rows = []
        for r in sorted(ar, key=lambda r: r["size"]):
            z, g = mmm(r["zcomm_us"]), mmm(r["gloo_us"])
            ratio = z[1] / g[1]
            pairs = mmm([a / b for a, b in zip(r["zcomm_us"], r["gloo_us"])])
            small = "-" if r["size"] > 4096 or n != 2 else (
                "met" if z[1] <= 15 else "NOT met")
            rows.append([human(r["size"]), med_range(z), med_range(g),
                         "%.2f" % ratio, fmt_mmm(pairs, 2),
                         "met" if ratio <= 0.5 else "NOT met", small])
        t, m = md_table(
            "torch.distributed %s%s, %d ranks, float32: time per call of the "
            "slowest rank, median (min-max) over the alternating pairs" % (
                op, " (async_op=True, then wait())" if async_op else "", n),
            heads, rows)
        texts.append(t)
        mds.append(m)
    ex = [r for r in rows_all if r["what"] == "exposed"]
    if ex:
        heads = ["model", "none (ms)", "ddp-zcomm (ms)", "ddp-gloo (ms)",
                 "engine (ms)", "exposed zcomm (ms)", "exposed gloo (ms)",
                 "exposed engine (ms)", "zcomm / gloo", "engine / gloo"]
        rows = []
        for r in ex:
            rs = r["rounds"]
            step = {v: mmm([1e3 * x[v] for x in rs]) for v in
                    ("none", "ddp-zcomm", "ddp-gloo", "engine")}
            exp = {v: [1e3 * (x[v] - x["none"]) for x in rs]
                   for v in ("ddp-zcomm", "ddp-gloo", "engine")}
            ratio = {v: mmm([a / b for a, b in zip(exp[v], exp["ddp-gloo"])
                             if b > 0]) for v in ("ddp-zcomm", "engine")}
            rows.append(["%s, %.1fM params, batch %d/rank, %d ranks" % (
                r["model"], r["params"] / 1e6, r["batch_per_rank"],
                r["ranks"])] + [med_range(step[v]) for v in step] +
                [med_range(mmm(exp[v])) for v in exp] +
                [med_range(ratio[v], 2) for v in ratio])
        t, m = md_table(
            "DDP exposed communication time: step with communication minus "
            "the plain step, slowest rank, median (min-max) over %d rounds; "
            "goal zcomm / gloo and engine / gloo <= 0.5" % max(
                len(r["rounds"]) for r in ex), heads, rows)
        texts.append(t)
        mds.append(m)
    heads = ["model", "ranks", "zcomm (samples/s)", "gloo (samples/s)",
             "zcomm / gloo", "goal >= 1.3 (large model)"]
    rows = []
    for r in rows_all:
        if r["what"] != "ddp":
            continue
        z, g = mmm(r["zcomm"]), mmm(r["gloo"])
        ratio = z[1] / g[1]
        rows.append(["%s MLP %.2fM params, batch %d/rank" % (
            r["model"], r["params"] / 1e6, r["batch_per_rank"]),
            str(r["ranks"]), med_range(z), med_range(g), "%.2f" % ratio,
            ("met" if ratio >= 1.3 else "NOT met") if r["model"] == "large"
            else "-"])
    t, m = md_table("torch DDP training throughput, zcomm vs gloo, slowest "
                    "rank, median (min-max) over the pairs", heads, rows,
                    notes)
    texts.append(t)
    mds.append(m)
    return texts, mds


def hvd_report(suite):
    jobs = suite.group_jobs("hvd")
    if not jobs:
        return [], []
    notes = ["%s: n/a: %s" % (j.label, j.error) for j in jobs if j.error]
    rows_all = [r for j in jobs for r in j.rows]
    heads = ["ranks", "engine min / median / max", "DDP-gloo min / median "
             "/ max", "engine / DDP-gloo", "per pair", "goal >= 1.3"]
    rows = []
    for r in rows_all:
        if r["what"] == "throughput":
            rows.append([str(r["ranks"]), fmt_mmm(r["engine"], 2),
                         fmt_mmm(r["ddp"], 2), "%.3f" % r["ratio"],
                         " ".join("%.2f" % x for x in r["pair_ratios"]),
                         "met" if r["ratio"] >= 1.3 else "NOT met"])
    t1, m1 = md_table("Horovod API (engine, DistributedOptimizer) vs DDP on "
                      "gloo: examples/hvd_synthetic_benchmark.py, total "
                      "img/sec", heads, rows)
    heads = ["ranks", "fusion", "step (ms) min / median / max",
             "cycles/step", "negotiation colls/cycle (max)",
             "data colls/step", "goal <= 1 per cycle"]
    rows = []
    for r in rows_all:
        if r["what"] == "overhead":
            rows.append([str(r["ranks"]), r["fusion"],
                         fmt_mmm(r["step_ms"], 3), "%.2f" % r["cycles"],
                         "%.3f" % r["negotiation_per_cycle"],
                         "%.1f" % r["data_colls"],
                         "met" if r["negotiation_per_cycle"] <= 1.0
                         else "NOT met"])
    t2, m2 = md_table("engine per-step overhead from Python: 128 small "
                      "float32 tensors per step, allreduce_async_ + "
                      "synchronize, fusion on (default threshold) / off "
                      "(ZC_FUSION_THRESHOLD=0), rank 0", heads, rows, notes)
    return [t1, t2], [m1, m2]


def recovery_report(suite):
    jobs = suite.group_jobs("recovery")
    if not jobs:
        return [], []
    notes = ["%s: n/a: %s" % (j.label, j.error) for j in jobs if j.error]
    heads = ["model", "transport", "ranks", "shrink ms min / median / max",
             "restart + reload ms min / median / max", "restart / shrink",
             "goal shrink <= 1000 ms", "goal ratio >= 10",
             "median ms from the kill: detected / restored / shrunk + engine / synced"]
    rows = []
    for j in jobs:
        for r in j.rows:
            sh = mmm(r["shrink_ms"])
            ph = r.get("phases_ms") or []
            at = " / ".join("%.0f" % mmm([p.get(k) for p in ph])[1]
                            for k in ("detect", "restore", "reset", "sync")) if ph else "n/a"
            rows.append([r.get("model") or "medium", r["transport"], str(r["ranks"]), fmt_mmm(sh),
                         fmt_mmm(mmm(r["restart_ms"])), "%.1f" % r["ratio"],
                         "met" if sh[1] <= 1000 else "NOT met",
                         "met" if r["ratio"] >= 10 else "NOT met", at])
    t, m = md_table("recovery after a rank's SIGKILL: time to the survivors' "
                    "next completed training step, hvd.elastic.run (shrink) "
                    "vs the whole job restarted with zcrun and its last "
                    "checkpoint reloaded from disk (perf/recovery_bench.py; "
                    "medians' ratio)", heads, rows, notes)
    return [t], [m]


def report(suite):
    texts, mds = [], []
    m = suite.machine
    mds.append("## Machine\n")
    for k in ("Model name", "nproc", "MemTotal", "kernel", "compiler",
              "openmpi", "gloo", "grpc++", "protobuf", "torch", "date",
              "loadavg_start"):
        if k in m:
            mds.append("- %s: %s" % (k, m[k]))
    # memcpy
    mem = suite.group_jobs("memcpy")
    if mem:
        lines = ["", "### memcpy / STREAM (GB/s, best of N)",
                 "%10s %8s %12s %12s %12s" % ("size", "threads", "memcpy",
                                              "copy", "triad")]
        md = ["", "#### memcpy / STREAM (GB/s = 1e9 B/s, best of N)", "",
              "| size | threads | memcpy | STREAM copy | STREAM triad |",
              "|---:|---:|---:|---:|---:|"]
        for j in mem:
            if j.error:
                lines.append("  %s: n/a: %s" % (j.label, j.error))
                continue
            th = j.data.get("threads", "?")
            for r in j.rows:
                vals = (human(r["size"]), th, r.get("memcpy_GBps"),
                        r.get("copy_GBps"), r.get("triad_GBps"))
                lines.append("%10s %8s %12.2f %12.2f %12.2f" % vals)
                md.append("| %s | %s | %.2f | %.2f | %.2f |" % vals)
        texts.append("\n".join(lines))
        mds.append("\n".join(md))
    # p2p
    p2p = suite.group_jobs("p2p")
    if p2p:
        pairs = [("zcomm shm zerocopy", "mpi"), ("zcomm tcp zerocopy", "grpc"),
                 ("zcomm shm copy", "zcomm shm zerocopy"),
                 ("zcomm tcp copy", "zcomm tcp zerocopy")]
        t, md = table("p2p one-way latency", p2p, "latency_us", pairs,
                      unit="us")
        texts.append(t)
        mds.append(md)
        t, md = table("p2p bandwidth", p2p, "bw_GBps", [
            (b, a) for a, b in pairs], digits=3, unit="GB/s")
        texts.append(t)
        mds.append(md)
    for g in sorted({j.group for j in suite.jobs if j.kind == "coll"}):
        jobs = suite.group_jobs(g)
        n = g[len("allreduce"):]
        pairs = [("zcomm auto", "mpi"), ("zcomm auto", "gloo ring_chunked"),
                 ("zcomm auto", "torch-gloo"), ("zcomm tcp", "gloo ring_chunked"),
                 ("zcomm tcp", "torch-gloo")]
        t, md = table("allreduce %s ranks, float32 sum: time" % n, jobs,
                      "time_us", pairs, unit="us")
        texts.append(t)
        mds.append(md)
        t, md = table("allreduce %s ranks, float32 sum: busbw" % n, jobs,
                      "busbw_GBps", [], digits=3, unit="GB/s")
        texts.append(t)
        mds.append(md)
    for fn in (tcpsock_report, bestmpi_report, limit_report, ps_report, engine_report, comm_init_report, torch_report,
               hvd_report, recovery_report):
        t, md = fn(suite)
        texts += t
        mds += md
    return "\n".join(texts), "\n".join(mds)


SECTIONS = ("machine", "memcpy", "p2p", "tcpsock", "allreduce2", "allreduceN",
            "bestmpi", "limit", "ps", "engine", "comm_init", "torch", "hvd",
            "recovery")


def main():
    ap = argparse.ArgumentParser(
        description="zcomm benchmark suite vs Open MPI, Gloo, "
                    "torch.distributed and gRPC")
    ap.add_argument("--build", required=True, help="meson build directory")
    ap.add_argument("--quick", action="store_true",
                    help="smaller sizes, fewer iterations (~10 min on 2 "
                    "cores)")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, one repetition: checks that every "
                    "program runs, in seconds per section (no numbers worth "
                    "reading)")
    ap.add_argument("--out", default=os.path.join(PERF_DIR, "results"),
                    help="output directory (default perf/results/)")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help="comma-separated sections (default all: %s)" %
                    ",".join(SECTIONS))
    ap.add_argument("--ps-models", default=None,
                    help="models of the PS comparison (default: quick "
                    "lstm,vgg16; full vgg16,lstm,inception3; any of vgg16, "
                    "alexnet, inception3, lstm, gru, fcn5)")
    ap.add_argument("--ps-reps", type=int, default=None,
                    help="alternating repetitions of the PS comparison "
                    "(default: quick 2, full 3)")
    ap.add_argument("--best-rounds", type=int, default=None,
                    help="rounds of the best-MPI comparison (default: quick "
                    "2, full 3)")
    ap.add_argument("--allow-missing-peers", action="store_true",
                    help="a missing peer is n/a instead of a failure")
    ap.add_argument("--np", type=int, default=4,
                    help="ranks of the second allreduce run (default 4)")
    ap.add_argument("--no-docs-img", action="store_true",
                    help="do not copy the plots into docs/img/")
    ap.add_argument("--timeout-scale", type=float, default=1.0,
                    help="scale every child's timeout")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print each benchmark's own output")
    a = ap.parse_args()
    if not os.path.isdir(a.build):
        print("error: build directory %s does not exist" % a.build,
              file=sys.stderr)
        return 2
    only = set(x.strip() for x in a.only.split(",") if x.strip())
    unknown = only - set(SECTIONS)
    if unknown:
        print("error: unknown section(s) in --only: %s (sections: %s)" % (
            ", ".join(sorted(unknown)), ",".join(SECTIONS)), file=sys.stderr)
        return 2
    suite = Suite(a)
    t0 = time.time()
    log("zcomm benchmark suite (%s mode), build %s, output %s" % (
        suite.mode_name, suite.build, suite.out))
    # A peer that the setup installs but the build lacks fails the suite
    # before anything runs: its comparisons are the point of the suite.
    missing = suite.missing_peers(only)
    if missing:
        log("\n" + "!" * 72)
        for name, why in missing:
            log("!! MISSING PEER %s: %s" % (name, why))
        log("!" * 72)
        if not a.allow_missing_peers:
            log("FAILED: peers that scripts/setup.sh --perf installs are "
                "missing; nothing was run (--allow-missing-peers runs the "
                "rest and reports them as n/a)")
            return 1
        log("--allow-missing-peers: running without them\n")
    suite.machine_info(only)  # always: the tables need it
    if "memcpy" in only:
        suite.memcpy()
    if "p2p" in only:
        suite.p2p()
    if "tcpsock" in only:
        suite.tcpsock()
    if "allreduce2" in only:
        suite.allreduce(2, suite.mode["coll_max"])
    if "allreduceN" in only and a.np != 2:
        suite.allreduce(a.np, suite.mode["collN_max"])
    if "bestmpi" in only:
        suite.bestmpi(sorted({2, a.np}))
    if "limit" in only:
        for np_ in sorted({2, a.np}):
            suite.limit(np_)
    if "ps" in only:
        suite.ps()
    if "engine" in only:
        suite.engine()
    if "comm_init" in only:
        suite.comm_init()
    if "torch" in only:
        suite.torch_bench()
    if "hvd" in only:
        suite.hvd_bench()
    if "recovery" in only:
        suite.recovery_bench()

    text, md = report(suite)
    log(text)
    made = plots(suite, suite.out)
    results = dict(mode=suite.mode_name, machine=suite.machine,
                   params=suite.mode, elapsed_s=round(time.time() - t0, 1),
                   loadavg_end=os.getloadavg(),
                   jobs=[j.to_dict() for j in suite.jobs])
    with open(os.path.join(suite.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(suite.out, "summary.md"), "w") as f:
        f.write("# zcomm benchmark suite: %s mode\n\n" % results["mode"])
        f.write("Ratios are zcomm time / peer time (below 1: zcomm faster); "
                "for bandwidth, peer / zcomm. `!` marks a size whose result "
                "was wrong.\n\n")
        f.write(md + "\n")
    if made and not a.no_docs_img:
        img = os.path.join(SRC_DIR, "docs", "img")
        os.makedirs(img, exist_ok=True)
        for p in made:
            shutil.copy(p, img)
        log("\nplots copied to %s" % img)
    log("\nresults: %s/results.json, summary.md, logs/, %d plots; %.0f s" % (
        suite.out, len(made), time.time() - t0))
    na = [j for j in suite.jobs if j.error]
    if na:
        log("n/a: " + ", ".join("%s (%s)" % (j.label, j.error[:80])
                                for j in na))
    # zcomm runs that failed or computed wrong results, peers that setup.sh
    # --perf installs but that are missing: the suite fails.
    bad_zc = [j for j in suite.jobs if j.library.startswith("zcomm")
              and (j.error or j.wrong)]
    bad_zc += [j for j in suite.jobs if j.wrong and j not in bad_zc]
    missing = [j for j in suite.jobs if j.missing and not
               j.library.startswith("zcomm") and
               j.library.split()[0].split("-")[0] in SETUP_PEERS]
    rc = 0
    if bad_zc:
        log("\nFAILED: zcomm runs that failed or reported wrong results:")
        for j in bad_zc:
            log("  %s: %s" % (j.label, j.error or j.note))
        rc = 1
    if missing and not a.allow_missing_peers:
        log("\nFAILED: peers that scripts/setup.sh --perf installs are "
            "missing (run it, then reconfigure the build; or pass "
            "--allow-missing-peers):")
        for j in missing:
            log("  %s: %s" % (j.label, j.error))
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
