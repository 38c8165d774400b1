#!/usr/bin/python3
"""Runs torch 1.13's own distributed test suite (DistributedTest._DistTestBase
of torch/testing/_internal/distributed/distributed_test.py, as installed by
python3-torch) on a backend, the way torch's test/distributed/
test_distributed_spawn.py does: one TestDistBackend subclass, WORLD_SIZE
processes spawned per test (dist_suite_case.py).

Two passes:
  --pass suite        BACKEND=<backend>: the suite as torch defines it for
                      that backend (zcomm, or gloo for the baseline).
  --pass gloo-named   the tests the suite reserves for gloo by name, against
                      zcomm: the class is defined with BACKEND=gloo and every
                      process group the tests create is made on zcomm
                      (dist_suite_case.py redirects backend "gloo" in
                      init_process_group/new_group). Only the tests that are
                      skipped at definition under BACKEND=zcomm and not under
                      BACKEND=gloo run: a skip decided by BACKEND alone, i.e.
                      a condition that names gloo (BACKEND != "gloo",
                      require_backend({"gloo"}), BACKEND in a feature set
                      listing gloo). --list shows them with the reason.

Usage (PYTHONPATH must hold the built package, build/python):
  dist_suite.py [--backend zcomm|gloo] [--pass suite|gloo-named]
                [--world-size N] [--init-method file|env]
                [-k SUBSTRING ...] [--tests NAME ...] [--tests-file FILE]
                [--list] [--json OUT] [--baseline GLOO_JSON]

Exit status: 0 when every test run passed (or skipped), 1 when any failed
(or, with --baseline, a test that passed on gloo did not pass here), 77 when
nothing ran (every selected test skipped, or none selected).
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["zcomm", "gloo"], default="zcomm")
    p.add_argument("--pass", dest="pass_", choices=["suite", "gloo-named"], default="suite")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--init-method", choices=["file", "env"], default="file",
                   help="INIT_METHOD as torch's run_test.py sets it (file: also runs "
                        "test_barrier_timeout_global, which the suite skips under env://)")
    p.add_argument("-k", dest="patterns", action="append", default=[],
                   help="run only tests whose name contains this (repeatable: any)")
    p.add_argument("--tests", nargs="+", default=[], help="run only these tests (exact names)")
    p.add_argument("--tests-file", help="run only the tests named in this file, one a line")
    p.add_argument("--list", action="store_true", help="print the selection and exit")
    p.add_argument("--json", help="write every test's outcome here")
    p.add_argument("--baseline", help="a --json file of a gloo run: every test that passed "
                                      "there must pass here")
    p.add_argument("--decorator-skips", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.pass_ == "gloo-named" and a.backend != "zcomm":
        p.error("--pass gloo-named runs the gloo-only tests against zcomm (--backend zcomm)")
    return a


def _setup_env(a):
    backend = "gloo" if a.pass_ == "gloo-named" else a.backend
    os.environ["BACKEND"] = backend
    if a.pass_ == "gloo-named":
        os.environ["ZC_SUITE_PG_BACKEND"] = "zcomm"
    else:
        os.environ.pop("ZC_SUITE_PG_BACKEND", None)
    os.environ["WORLD_SIZE"] = str(a.world_size)
    tmp = tempfile.mkdtemp(prefix="zc_dist_suite_")
    for d in ("barrier", "test_dir", "init_dir"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    os.environ["TEMP_DIR"] = tmp
    os.environ["INIT_METHOD"] = ("file://" + os.path.join(tmp, "init_dir", "shared_init_file")
                                 if a.init_method == "file" else "env://")
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    # Loopback only.
    os.environ.setdefault("ZC_SOCKET_IFNAME", "lo")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # Skips must show as skips (sandcastle turns them into passes).
    os.environ.pop("SANDCASTLE", None)
    os.environ.pop("TW_JOB_USER", None)
    return tmp


def _names(cls):
    return unittest.TestLoader().getTestCaseNames(cls)


def _decorator_skips(cls):
    """{test: reason} for the tests skipped when the class is defined."""
    out = {}
    for n in _names(cls):
        fn = getattr(cls, n)
        if getattr(fn, "__unittest_skip__", False):
            out[n] = getattr(fn, "__unittest_skip_why__", "")
    return out


def _zcomm_decorator_skips():
    """The decorator skips of the suite defined for BACKEND=zcomm (a child
    process: the suite reads BACKEND once, at import)."""
    env = dict(os.environ, BACKEND="zcomm")
    env.pop("ZC_SUITE_PG_BACKEND", None)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--decorator-skips"],
                       env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit("dist_suite: could not list the suite's skips under BACKEND=zcomm")
    return json.loads(r.stdout.strip().splitlines()[-1])


class _Result(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}  # name -> {"outcome", "reason", "seconds"}
        self._t0 = {}
        self.total = 0
        self.index = 0

    def _name(self, test):
        return test.id().split(".")[-1]

    def startTest(self, test):
        self._t0[self._name(test)] = time.time()
        self.index += 1
        super().startTest(test)

    def _record(self, test, outcome, reason=""):
        n = self._name(test)
        secs = time.time() - self._t0.get(n, time.time())
        self.outcomes[n] = {"outcome": outcome, "reason": reason, "seconds": round(secs, 1)}
        line = f"[{self.index}/{self.total}] {n}: {outcome}"
        if reason:
            line += f" ({reason.splitlines()[0][:160]})"
        print(f"{line} [{secs:.1f} s]", flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test).strip().splitlines()[-1])

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test).strip().splitlines()[-1])

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def main(argv):
    a = _parse(argv)
    tmp = _setup_env(a)
    sys.argv = [sys.argv[0]]  # torch's common_utils parses sys.argv at import
    try:
        import torch  # noqa: F401
        import torch.distributed  # noqa: F401
    except ImportError as e:
        print(f"SKIP: torch is not importable: {e}")
        return SKIP
    if "zcomm" in (os.environ["BACKEND"], os.environ.get("ZC_SUITE_PG_BACKEND")):
        try:
            import zcomm.torch  # noqa: F401
        except ImportError as e:
            print(f"SKIP: zcomm.torch is not importable (PYTHONPATH=build/python?): {e}")
            return SKIP
    import dist_suite_case
    cls = dist_suite_case.TestDistBackendWithSpawn

    if a.decorator_skips:
        print(json.dumps(_decorator_skips(cls)))
        return 0

    names = list(_names(cls))
    why_selected = {}
    if a.pass_ == "gloo-named":
        zskips = _zcomm_decorator_skips()
        gskips = _decorator_skips(cls)
        for n in names:
            if n in zskips and n not in gskips:
                why_selected[n] = zskips[n]
        names = [n for n in names if n in why_selected]
    universe = len(names)
    wanted = set(a.tests)
    if a.tests_file:
        with open(a.tests_file) as f:
            wanted |= {ln.strip() for ln in f if ln.strip() and not ln.startswith("#")}
    if wanted:
        unknown = sorted(wanted - set(names))
        if unknown:
            # A list that names tests this torch does not have (or this pass
            # does not select) would silently run less: refuse it.
            print(f"dist_suite: not in this pass's selection: {', '.join(unknown)}")
            return 2
        names = [n for n in names if n in wanted]
    if a.patterns:
        names = [n for n in names if any(p in n for p in a.patterns)]

    header = (f"dist_suite: backend={a.backend} pass={a.pass_} world_size={a.world_size} "
              f"init_method={os.environ['INIT_METHOD'].split(':')[0]}://")
    if a.list:
        print(header)
        for n in names:
            print(f"{n}\t{why_selected.get(n, '')}".rstrip())
        print(f"{len(names)} selected of {universe}")
        return 0

    print(header, flush=True)
    print(f"dist_suite: {len(names)} tests selected"
          + (f" ({universe - len(names)} of this pass left out by -k/--tests)"
             if universe != len(names) else ""), flush=True)
    suite = unittest.TestSuite(cls(n) for n in names)
    runner = unittest.TextTestRunner(resultclass=_Result, verbosity=0, stream=sys.stderr)
    t0 = time.time()
    result_holder = {}

    def make_result(*args, **kwargs):
        r = _Result(*args, **kwargs)
        r.total = len(names)
        result_holder["r"] = r
        return r

    runner.resultclass = make_result
    runner.run(suite)
    res = result_holder["r"]
    elapsed = time.time() - t0
    outcomes = res.outcomes
    count = {k: sum(1 for o in outcomes.values() if o["outcome"] == k)
             for k in ("passed", "failed", "skipped")}
    skip_reasons = {}
    for o in outcomes.values():
        if o["outcome"] == "skipped":
            skip_reasons[o["reason"]] = skip_reasons.get(o["reason"], 0) + 1

    missing = []
    if a.baseline:
        with open(a.baseline) as f:
            base = json.load(f)["tests"]
        missing = sorted(n for n, o in base.items()
                         if o["outcome"] == "passed" and n in outcomes
                         and outcomes[n]["outcome"] != "passed")

    print(f"\n{header}: {count['passed']} passed, {count['failed']} failed, "
          f"{count['skipped']} skipped, of {len(names)} run in {elapsed:.0f} s")
    for r, c in sorted(skip_reasons.items(), key=lambda x: -x[1]):
        print(f"  skipped {c:3d}: {r}")
    for n, o in sorted(outcomes.items()):
        if o["outcome"] == "failed":
            print(f"  FAILED {n}: {o['reason']}")
    for n in missing:
        print(f"  passed on gloo, not here: {n} ({outcomes[n]['outcome']})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"backend": a.backend, "pass": a.pass_, "world_size": a.world_size,
                       "init_method": os.environ["INIT_METHOD"].split(":")[0],
                       "seconds": round(elapsed), "counts": count,
                       "selected_because": why_selected, "tests": outcomes}, f, indent=1,
                      sort_keys=True)
    shutil.rmtree(tmp, ignore_errors=True)
    if count["failed"] or missing:
        return 1
    if count["passed"] == 0:
        print("dist_suite: nothing ran (every selected test skipped)")
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
