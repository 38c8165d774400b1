#!/usr/bin/python3
"""Runs Horovod's own test suite (test/parallel/test_torch.py of a Horovod
checkout, unchanged) against zcomm.torch, as a user migrating real code
would: `import horovod.torch as hvd` resolves to zcomm.torch through a shim
package made here in a temporary folder (horovod.torch = zcomm.torch; the
rest of the `horovod` package the test utilities import comes from the
checkout), and every rank gets the variables `horovodrun --gloo` sets.

  /usr/bin/python3 scripts/horovod_suite.py HOROVOD_CHECKOUT [--build build]
      [--np 2 3 4] [--mode each file] [--tests NAME ...] [--deselect NAME ...]
      [--out DIR]

--mode each: every test in its own zcrun job; --mode file: the whole file
in one job, as a user runs it. A test passes when it passes on every rank,
skips when it skips on every rank, and fails otherwise. Prints one table
row per test and the counts, writes them to OUT/summary.txt, and exits 1
when any test failed. --deselect leaves tests out (by name, pytest -k, in the
whole-file job), for instance one that fails on some ranks only, which
leaves the ranks in different tests for the rest of a whole-file job; the
summary names them. Traffic stays on loopback (ZC_SOCKET_IFNAME=lo).
The suite is not part of zcomm: fetch it (git clone
https://github.com/horovod/horovod) outside this repository.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))

SHIM = '''"""Shim: horovod.torch is zcomm.torch. The rest of the package (what the
test utilities import) is the Horovod checkout's."""
import os
import sys

import zcomm.torch

__path__.append(os.path.join(os.environ["HOROVOD_CHECKOUT"], "horovod"))
sys.modules["horovod.torch"] = zcomm.torch
torch = zcomm.torch
'''

# What horovodrun --gloo sets, from zcrun's variables; then pytest with one
# JUnit report per rank.
RANK_CMD = ('export HOROVOD_RANK=$ZC_RANK HOROVOD_SIZE=$ZC_SIZE HOROVOD_LOCAL_RANK=$ZC_LOCAL_RANK '
            'HOROVOD_LOCAL_SIZE=$ZC_LOCAL_SIZE HOROVOD_CROSS_RANK=0 HOROVOD_CROSS_SIZE=1 '
            'HOROVOD_HOSTNAME=localhost; '
            'exec /usr/bin/python3 -m pytest -q -p no:cacheprovider '
            '--junitxml="$REPORT.$ZC_RANK.xml" "$@"')


def collect(checkout, env):
    out = subprocess.run(["/usr/bin/python3", "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", "test_torch.py"],
                         cwd=os.path.join(checkout, "test", "parallel"), env=env,
                         capture_output=True, text=True, check=True).stdout
    return [l.split("::")[-1] for l in out.splitlines() if "::" in l]


def read_reports(prefix, n):
    """test name -> list of per-rank outcomes ('passed', 'failed', 'skipped'),
    with the first failure message."""
    outcomes, messages = {}, {}
    for r in range(n):
        path = "%s.%d.xml" % (prefix, r)
        if not os.path.exists(path):
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("name")
            status = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    status = "failed"
                    messages.setdefault(name, "rank %d: %s" % (r, (child.get("message") or "")[:200]))
                elif child.tag == "skipped":
                    status = "skipped"
                    messages.setdefault(name, (child.get("message") or "")[:200])
            outcomes.setdefault(name, [None] * n)[r] = status
    return outcomes, messages


def verdict(per_rank):
    if all(s == "passed" for s in per_rank):
        return "PASS"
    if all(s == "skipped" for s in per_rank):
        return "SKIP"
    return "FAIL"


def run_job(zcrun, n, tests, report, env, timeout, deselect=()):
    cwd = os.path.join(env["HOROVOD_CHECKOUT"], "test", "parallel")
    args = ["test_torch.py::TorchTests::%s" % t for t in tests] if tests else ["test_torch.py"]
    if deselect:  # by name: pytest's node ids depend on where it finds its rootdir
        args += ["-k", "not (%s)" % " or ".join(deselect)]
    cmd = [zcrun, "--timeout", str(timeout), "-np", str(n), "sh", "-c", RANK_CMD, "rank"] + args
    job_env = dict(env, REPORT=report)
    try:
        p = subprocess.run(cmd, cwd=cwd, env=job_env, capture_output=True, text=True,
                           timeout=timeout + 60)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else \
            (e.stdout or "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkout", help="a Horovod checkout (git clone https://github.com/horovod/horovod)")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--np", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("--mode", nargs="+", choices=["each", "file"], default=["each", "file"])
    ap.add_argument("--tests", nargs="+", help="only these tests (names)")
    ap.add_argument("--deselect", nargs="+", default=[], help="leave these tests out (names)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per zcrun job (file: x10)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    checkout = os.path.abspath(a.checkout)
    build = os.path.abspath(a.build)
    zcrun = os.path.join(build, "launcher", "zcrun")
    out = a.out or tempfile.mkdtemp(prefix="horovod_suite.")
    shim = os.path.join(out, "shim", "horovod")
    os.makedirs(shim, exist_ok=True)
    with open(os.path.join(shim, "__init__.py"), "w") as f:
        f.write(SHIM)
    env = dict(os.environ, HOROVOD_CHECKOUT=checkout, ZC_SOCKET_IFNAME="lo",
               GLOO_SOCKET_IFNAME="lo", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([os.path.dirname(shim), os.path.join(build, "python")]))
    env.setdefault("ZC_TIMEOUT", "30")
    commit = subprocess.run(["git", "-C", checkout, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    tests = [t for t in (a.tests or collect(checkout, env)) if t not in a.deselect]
    lines = ["Horovod %s test/parallel/test_torch.py (%d tests) on zcomm.torch" % (commit, len(tests))]
    if a.deselect:
        lines.append("deselected: %s" % " ".join(a.deselect))
    failed = False
    for mode in a.mode:
        for n in a.np:
            results, messages = {}, {}
            if mode == "each":
                for t in tests:
                    report = os.path.join(out, "each_np%d_%s" % (n, t))
                    rc, text = run_job(zcrun, n, [t], report, env, a.timeout)
                    o, m = read_reports(report, n)
                    results[t] = verdict(o.get(t, [None] * n))
                    if results[t] == "FAIL":
                        messages[t] = m.get(t) or "exit %d: %s" % (rc, text[-300:].replace("\n", " | "))
                    elif results[t] == "SKIP":
                        messages[t] = m.get(t, "")
                    print("np %d each %-55s %s %s" % (n, t, results[t], messages.get(t, "")[:120]),
                          flush=True)
            else:
                report = os.path.join(out, "file_np%d" % n)
                rc, text = run_job(zcrun, n, a.tests or [], report, env, a.timeout * 10, a.deselect)
                with open(report + ".log", "w") as f:
                    f.write(text)
                o, m = read_reports(report, n)
                for t in tests:
                    results[t] = verdict(o.get(t, [None] * n))
                    if results[t] != "PASS":
                        messages[t] = m.get(t) or ("not reported (job exit %d)" % rc)
                    print("np %d file %-55s %s %s" % (n, t, results[t], messages.get(t, "")[:120]),
                          flush=True)
            counts = {k: sum(1 for v in results.values() if v == k) for k in ("PASS", "FAIL", "SKIP")}
            failed |= counts["FAIL"] > 0
            lines.append("np %d, %s: %d passed, %d failed, %d skipped" % (
                n, "each test in its own job" if mode == "each" else "the whole file in one job",
                counts["PASS"], counts["FAIL"], counts["SKIP"]))
            for t in sorted(results):
                if results[t] != "PASS":
                    lines.append("  %s %s: %s" % (results[t], t, messages.get(t, "")))
    summary = "\n".join(lines)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(summary + "\n")
    print(summary)
    print("reports in %s" % out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
