"""Starts zcomm.torch (Horovod API) workers under zcrun or mpirun, loopback
only; exits 77 (SKIP) only where torch is absent."""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def require_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIP: torch is not installed")
        sys.exit(77)
    import zcomm.torch  # noqa: F401  (built: a missing extension is a failure)


def _env(extra):
    env = dict(os.environ)
    env["ZC_SOCKET_IFNAME"] = "lo"
    env["GLOO_SOCKET_IFNAME"] = "lo"
    env.setdefault("ZC_TIMEOUT", "60")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [HERE, env.get("PYTHONPATH", "")] if p)
    env.update(extra or {})
    return env


def zcrun(n, script, args=(), env=None, timeout=240):
    """Runs script on n ranks under zcrun; returns (exit code, output)."""
    cmd = [os.environ["ZCRUN"], "--timeout", str(timeout - 20), "-np", str(n), sys.executable,
           os.path.join(HERE, script)] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(env))
    return p.returncode, p.stdout + p.stderr


def _mpirun_path():
    # Open MPI's by name: the mpirun alternative may point to MPICH's.
    return shutil.which("mpirun.openmpi") or shutil.which("mpirun")


def have_mpirun():
    return _mpirun_path() is not None


def mpirun(n, script, args=(), env=None, timeout=240):
    """Runs script on n ranks under Open MPI's mpirun (zcomm bootstraps by PMIx)."""
    e = _env(env)
    cmd = [_mpirun_path(), "--allow-run-as-root", "--oversubscribe", "-np", str(n),
           "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
    for k in ("PYTHONPATH", "ZC_SOCKET_IFNAME", "ZC_TIMEOUT", "GLOO_SOCKET_IFNAME"):
        cmd += ["-x", k]
    for k in (env or {}):
        cmd += ["-x", k]
    cmd += [sys.executable, os.path.join(HERE, script)] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
    return p.returncode, p.stdout + p.stderr


def ok_ranks(out, n, tag="OK"):
    """The ranks that printed '<tag> rank R'."""
    # mpirun may join two ranks' lines ("OK rank 1OK rank 0"): no word boundaries.
    return sorted({int(m) for m in re.findall(r"(?<![A-Za-z])%s rank (\d)" % tag, out)})


def expect_ok(what, n, rc, out, tag="OK"):
    ranks = ok_ranks(out, n, tag)
    if rc != 0 or ranks != list(range(n)):
        print(out)
        raise SystemExit("FAIL: %s: exit %d, ranks that finished: %s" % (what, rc, ranks))
    print("%s: every rank passed" % what, flush=True)
