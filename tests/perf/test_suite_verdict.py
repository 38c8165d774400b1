#!/usr/bin/python3
"""perf/run_suite.py's verdict: exit 1 when a zcomm run fails, is wrong, or
leaves no (or an unfinished) result; exit 1 before running anything when a
peer that scripts/setup.sh --perf installs is missing from the build; 0 when
all is well. The zcomm program is a stand-in in a fake build folder, so each
case takes about a second; one real run (--smoke --only p2p of the real
build) checks that the suite still reads zc_p2p's JSON; --smoke runs of the
sections limit, tcpsock and recovery check theirs.

    test_suite_verdict.py RUN_SUITE_PY REAL_BUILD_DIR
"""
import json
import os
import stat
import subprocess
import sys
import tempfile

SUITE, REAL_BUILD = sys.argv[1:3]
failures = []


def check(cond, what, out=""):
    if not cond:
        failures.append(what)
        print("FAIL: %s\n%s" % (what, out[-3000:]), flush=True)


def write_exe(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


# zcrun stand-in: drops zcrun's own flags, runs the program once.
FAKE_ZCRUN = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    -np|-x) shift 2 ;;
    --no-tag-output|--oversubscribe) shift ;;
    *) break ;;
  esac
done
exec "$@"
"""

# zc_p2p stand-in: FAKE_MODE picks what it does with --json FILE.
FAKE_P2P = """#!/usr/bin/python3
import json, os, sys
mode = os.environ["FAKE_MODE"]
path = sys.argv[sys.argv.index("--json") + 1]
rows = [dict(size=s, count=s, iters=1, latency_us=1.0, bw_GBps=1.0,
             wrong=1 if mode == "wrong" and s == 4 else 0) for s in (1, 2, 4)]
doc = dict(benchmark="p2p", library="zcomm", variant="fake", ranks=2,
           complete=mode != "incomplete", error=None, results=rows)
if mode == "norows":
    doc["results"] = []
if mode != "nojson":
    json.dump(doc, open(path, "w"))
print("fake zc_p2p", mode)
sys.exit(1 if mode == "fail" else 0)
"""


def suite(build, out, *extra, env=None, only="p2p", timeout=300):
    cmd = ["/usr/bin/python3", SUITE, "--build", build, "--smoke", "--only",
           only, "--out", out, "--no-docs-img"] + list(extra)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=dict(os.environ, **(env or {})),
                       timeout=timeout)
    return p.returncode, p.stdout


with tempfile.TemporaryDirectory() as tmp:
    fake = os.path.join(tmp, "build")
    write_exe(os.path.join(fake, "launcher", "zcrun"), FAKE_ZCRUN)
    write_exe(os.path.join(fake, "perf", "zc_p2p"), FAKE_P2P)
    out = os.path.join(tmp, "out")

    # The fake build has neither the MPI nor the gRPC peer: the suite stops
    # before running anything and says which and why.
    rc, text = suite(fake, out, env={"FAKE_MODE": "ok"})
    check(rc == 1, "missing peers fail the suite (rc %d)" % rc, text)
    check("MISSING PEER Open MPI" in text and "MISSING PEER gRPC" in text,
          "the missing peers are named", text)
    check("== p2p zcomm" not in text, "nothing ran after the missing peers "
          "were found", text)

    # With the peers allowed to be missing, the zcomm runs decide.
    for mode, want in (("ok", 0), ("fail", 1), ("wrong", 1), ("nojson", 1),
                       ("incomplete", 1), ("norows", 1)):
        rc, text = suite(fake, out, "--allow-missing-peers",
                         env={"FAKE_MODE": mode})
        check(rc == want, "FAKE_MODE=%s: rc %d, want %d" % (mode, rc, want),
              text)
        if want:
            check("FAILED: zcomm runs that failed or reported wrong results"
                  in text, "FAKE_MODE=%s: the failure is explained" % mode,
                  text)
        res = json.load(open(os.path.join(out, "results.json")))
        zc = [j for j in res["jobs"] if j["library"].startswith("zcomm")]
        check(len(zc) == 4, "4 zcomm p2p jobs recorded (%d)" % len(zc))

    # The real build: the suite runs zc_p2p (and the peers that are built)
    # and reads its JSON.
    rc, text = suite(REAL_BUILD, out, "--allow-missing-peers")
    check(rc == 0, "real --smoke --only p2p: rc %d" % rc, text)
    res = json.load(open(os.path.join(out, "results.json")))
    zc = [j for j in res["jobs"] if j["library"].startswith("zcomm")]
    check(len(zc) == 4 and all(j["rows"] and not j["error"] for j in zc),
          "real zc_p2p jobs have rows and no error", text)
    check(all(r["latency_us"] > 0 and r["bw_GBps"] > 0 and r["wrong"] == 0
              for j in zc for r in j["rows"]),
          "real zc_p2p rows: latency, bandwidth, #wrong 0", text)
    check(all(" --reps " in " ".join(j["cmd"]) for j in zc),
          "zc_p2p repeats its timed loops", text)

    # The machine's limit: the ideal and zcomm on both kinds of buffers, 2
    # and 4 ranks, one round each; every ratio computed.
    rc, text = suite(REAL_BUILD, out, "--allow-missing-peers", only="limit")
    check(rc == 0, "real --smoke --only limit: rc %d" % rc, text)
    res = json.load(open(os.path.join(out, "results.json")))
    lim = [j for j in res["jobs"] if j["kind"] == "limit"]
    check(len(lim) == 8 and all(j["rows"] and not j["error"] for j in lim),
          "8 limit jobs with rows and no error (%d)" % len(lim), text)
    check("zc_mem_alloc / ideal" in text and "malloc / ideal" in text,
          "the limit table is printed", text)

    # tcp against the plain socket: both programs, one round, the ratio.
    rc, text = suite(REAL_BUILD, out, "--allow-missing-peers", only="tcpsock")
    check(rc == 0, "real --smoke --only tcpsock: rc %d" % rc, text)
    res = json.load(open(os.path.join(out, "results.json")))
    ts = [j for j in res["jobs"] if j["kind"] == "tcpsock"]
    check(len(ts) == 2 and all(j["rows"] and not j["error"] for j in ts),
          "2 tcpsock jobs with rows and no error (%d)" % len(ts), text)
    check("zcomm / socket" in text, "the tcp/socket table is printed", text)

    # Recovery after a lost rank: one round of shrink and of restart + reload
    # per transport, both times and their ratio (needs torch).
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    if have_torch:
        rc, text = suite(REAL_BUILD, out, "--allow-missing-peers", only="recovery",
                         timeout=900)
        check(rc == 0, "real --smoke --only recovery: rc %d" % rc, text)
        res = json.load(open(os.path.join(out, "results.json")))
        rec = [r for j in res["jobs"] if j["kind"] == "recovery" and not j["error"]
               for r in j["rows"]]
        check(sorted(r["transport"] for r in rec) == ["shm", "tcp"] and
              all(r["shrink_ms"][0] > 0 and r["restart_ms"][0] > 0 for r in rec),
              "recovery rows for shm and tcp with both times (%s)" % rec, text)
        check("restart / shrink" in text, "the recovery table is printed", text)

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("all checks passed")
