"""Runs a function on N ranks of a torch.distributed job (multiprocessing),
each with the process group initialised, and returns every rank's result.
Shared by the zcomm.torch tests.

The ranks are forked from multiprocessing's fork server, which imports
torch and zcomm.torch once per test program: a spawned rank spends 3-7 s of
a 2-core machine's time importing torch, more than most tests take. Each
rank is still a fresh child of that single-threaded server, never of the
test process, and starts with the environment the test process has when it
calls run() (the server's own is the one it was started with)."""
import datetime
import faulthandler
import multiprocessing as mp
import os
import queue
import socket
import sys
import tempfile
import time
import traceback

SKIP = 77


def require_torch():
    """Exit 77 (meson SKIP) only where torch itself is absent."""
    try:
        import torch  # noqa: F401
        import torch.distributed  # noqa: F401
    except ImportError as e:
        print(f"SKIP: torch is not importable: {e}")
        sys.exit(SKIP)


def loopback_env():
    # Every test stays on loopback, also for the unique-id rendezvous.
    os.environ["ZC_SOCKET_IFNAME"] = "lo"
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init_method(kind, tmpdir):
    if kind == "tcp":
        return f"tcp://127.0.0.1:{free_port()}"
    if kind == "file":
        return "file://" + os.path.join(tmpdir, "store")
    if kind == "env":
        return "env://"
    raise ValueError(kind)


_FORK_SERVER = mp.get_context("forkserver")


class RankProcess(_FORK_SERVER.Process):
    """A rank forked from the fork server (see the module's doc), in the
    environment the test process has when it creates the rank. Subclasses
    redo in prepare() what a spawned rank's imports would see differently."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._environ = dict(os.environ)

    def prepare(self):
        pass

    def run(self):
        os.environ.clear()
        os.environ.update(self._environ)
        self.prepare()
        super().run()


def preload(modules):
    """The modules the fork server imports once, before its first rank."""
    _FORK_SERVER.set_forkserver_preload(modules)


def _entry(fn, rank, world, backend, init_method, port, args, q, timeout):
    loopback_env()
    # A rank still running near the job's deadline shows where it is stuck.
    faulthandler.dump_traceback_later(max(timeout - 5, 1), exit=False)
    try:
        import torch.distributed as dist
        import zcomm.torch  # noqa: F401  registers "zcomm"
        if init_method == "env://":
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                              RANK=str(rank), WORLD_SIZE=str(world))
        dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        result = fn(rank, world, *args)
        dist.destroy_process_group()
        q.put((rank, "ok", result))
    except BaseException:  # noqa: BLE001  reported to the parent
        q.put((rank, "error", traceback.format_exc()))


def run(fn, world, *args, backend="zcomm", init="tcp", timeout=180, may_die=()):
    """Returns [result of rank 0, ...] (None for a rank in may_die that died
    without a result); raises naming the ranks that failed."""
    preload(["torch", "torch.distributed", "zcomm.torch"])
    q = _FORK_SERVER.Queue()
    with tempfile.TemporaryDirectory() as tmpdir:
        init_method = _init_method(init, tmpdir)
        port = free_port()
        procs = [RankProcess(target=_entry,
                             args=(fn, r, world, backend, init_method, port, args, q, timeout))
                 for r in range(world)]
        for p in procs:
            p.start()
        results, errors = {}, {}
        deadline = time.monotonic() + timeout
        try:
            while len(results) + len(errors) < world:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{backend} job of {world} ranks: ranks "
                                       f"{sorted(set(range(world)) - set(results) - set(errors))}"
                                       f" did not finish within {timeout} s")
                try:
                    rank, status, value = q.get(timeout=min(left, 1.0))
                except queue.Empty:
                    if any(p.exitcode not in (None, 0) for p in procs) and q.empty():
                        dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)
                                and r not in results and r not in errors]
                        for r in [r for r in dead if r in may_die]:
                            results[r] = None
                        dead = [r for r in dead if r not in may_die]
                        if dead:
                            raise RuntimeError(f"ranks {dead} died: exit codes "
                                               f"{[procs[r].exitcode for r in dead]}")
                    continue
                (results if status == "ok" else errors)[rank] = value
        finally:
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
                    p.join()
    if errors:
        raise RuntimeError("".join(f"--- rank {r} ---\n{tb}" for r, tb in sorted(errors.items())))
    return [results[r] for r in range(world)]
