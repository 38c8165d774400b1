"""The flight recorder end to end: a job that hangs or fails in a known way
(trace_scenario.cpp) runs under zcrun; zcrun collects the ranks' dumps and
prints the diagnosis, which must name the right rank, sequence number and
call. The 'ok' scenario checks a clean job's dumps: they parse, hold the
calls that ran, round-trip through zcomm.trace, and export a Chrome trace.

usage: test_trace_diagnosis.py ZCRUN SCENARIO_PROGRAM SCENARIO TRANSPORT NP
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import zcomm.trace as zt

ZCRUN, PROG, SCENARIO, TRANSPORT, NP = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
LAST = NP - 1


def run_job(extra_args=(), env_extra=None, timeout_s=120, job_timeout_s=90):
    env = dict(os.environ, ZC_TRANSPORT=TRANSPORT, ZC_TIMEOUT="4", ZC_SOCKET_IFNAME="lo")
    env.pop("ZC_TRACE_DIR", None)
    env.update(env_extra or {})
    if PROG.endswith(".py"):  # a torch script: its scenario is its own
        cmd = [ZCRUN, "--timeout", "150", "-np", str(NP), sys.executable, PROG]
    else:
        cmd = [ZCRUN, "--timeout", str(job_timeout_s), "-np", str(NP), PROG, SCENARIO] + list(extra_args)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s)
    out = p.stdout.decode(errors="replace")
    # Under scripts/sanitize.sh: a report by any rank fails the test, even
    # where the rank was meant to fail anyway.
    expect(not any(r in out for r in SANITIZER_REPORTS), "a sanitizer reported", out)
    return p.returncode, out


SANITIZER_REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
                     "runtime error: ")


def expect(cond, what, out):
    if not cond:
        print("FAIL: %s\n--- zcrun output ---\n%s" % (what, out))
        sys.exit(1)


def verdict_of(out):
    for line in out.splitlines():
        if line.startswith("zcrun: verdict: "):
            return line[len("zcrun: verdict: "):]
    return None


EXPECTED = {
    "skip": "rank %d never posted allreduce #6 (count=8, float32, sum); " % LAST,
    "mismatch": "collective #6 does not match: ",
    "stop": "rank %d wrote no dump (its process " % LAST,
    "deadlock": "send/recv deadlock: rank 0 waits in recv from %d (tag 7, 8 bytes)" % LAST,
    "send_full": "rank 0 waits in send to %d (tag 7, 8 bytes); rank %d: " % (LAST, LAST),
    "ddp": "rank %d never posted allreduce #" % LAST,
    "ps_skip": "rank %d never pushed key 8 for round 3 (rank %d pushed it 2 times); " % (LAST, LAST),
}


def _ranks_text(rs):
    rs = list(rs)
    return ("rank %d" % rs[0]) if len(rs) == 1 else "ranks " + ", ".join(str(r) for r in rs)


def check_failure():
    if SCENARIO == "send_full":
        # The send still waits when zcrun's job timeout dumps every rank: its
        # record was made before it waited. Then its own timeout fails it.
        code, out = run_job(env_extra={"ZC_TIMEOUT": "100"}, job_timeout_s=5)
        v = verdict_of(out) or ""
        expect(code != 0 and v.startswith(EXPECTED[SCENARIO]) and "waits in send" in v,
               "verdict %r at the job timeout" % v, out)
        expect("(started" in out, "the send is started, not failed, in the dump", out)
        print(out)
    code, out = run_job()
    expect(code != 0, "the job should fail", out)
    v = verdict_of(out)
    expect(v is not None, "zcrun printed no verdict", out)
    expect(v.startswith(EXPECTED[SCENARIO]), "verdict %r should start with %r" % (v, EXPECTED[SCENARIO]), out)
    if SCENARIO == "skip":
        others = list(range(LAST))
        expect(("wait for it there" in v) or ("waits for it there" in v), "the waiting ranks are named", out)
        expect(str(others[-1]) in v, "the waiting ranks are named", out)
        expect("first divergence: collective #6" in out, "first divergence named", out)
        expect("[label step 6]" in out, "the waiting ranks' label is shown", out)
    if SCENARIO == "mismatch":
        expect("rank %d called broadcast #6 (count=8, float32, root=0)" % LAST in v, "the odd call is named", out)
        expect("called allreduce #6 (count=8, float32, sum)" in v, "the others' call is named", out)
    if SCENARIO == "stop":
        expect("is stopped" in v, "the stopped process is named", out)
        expect("allreduce #6" in v, "the others wait in allreduce #6", out)
    if SCENARIO == "ddp":
        expect("wait for it there" in v or "waits for it there" in v, "the waiting ranks are named", out)
        expect(re.search(r"\[label allreduce #[0-9]+\]", out), "the torch op and its number are the waiting rank's label", out)
    if SCENARIO == "ps_skip":
        expect("wait in ps_pull(key 8, 16 bytes)" in v or "waits in ps_pull(key 8, 16 bytes)" in v,
               "the waiting ranks' pull of key 8 is named", out)
        expect(_ranks_text(range(LAST)) in v, "every other rank waits", out)
    if SCENARIO == "deadlock":
        for r in range(NP):
            expect("rank %d waits in recv from %d (tag 7, 8 bytes)" % (r, (r - 1) % NP) in v,
                   "rank %d's receive is in the cycle" % r, out)
    print(out)
    if SCENARIO == "skip" and TRANSPORT == "tcp":
        check_analyzer_choice()


def check_analyzer_choice():
    """ZCRUN_PYTHON picks the analyzer's interpreter; one that cannot run
    leaves the dumps in place, named."""
    folder = tempfile.mkdtemp(prefix="zc_trace_python_")
    try:
        wrapper, marker = os.path.join(folder, "python"), os.path.join(folder, "ran")
        with open(wrapper, "w") as f:
            f.write('#!/bin/sh\necho "$@" > %s\nexec %s "$@"\n' % (marker, sys.executable))
        os.chmod(wrapper, 0o755)
        code, out = run_job(env_extra={"ZCRUN_PYTHON": wrapper})
        expect(code != 0 and (verdict_of(out) or "").startswith(EXPECTED["skip"]),
               "a verdict through ZCRUN_PYTHON", out)
        ran = open(marker).read() if os.path.exists(marker) else ""
        expect(ran.startswith("-m zcomm.trace "), "ZCRUN_PYTHON ran the analyzer (%r)" % ran, out)
        code, out = run_job(env_extra={"ZCRUN_PYTHON": os.path.join(folder, "missing")})
        expect(code != 0 and verdict_of(out) is None, "no verdict without an interpreter", out)
        kept = [l.split()[6] for l in out.splitlines() if l.startswith("zcrun: the flight-recorder dumps are in ")]
        expect(len(kept) == 1 and any(n.startswith("zctrace-") for n in os.listdir(kept[0])),
               "the dumps are kept and named", out)
        shutil.rmtree(kept[0])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check_ok():
    folder = tempfile.mkdtemp(prefix="zc_trace_ok_")
    try:
        code, out = run_job([folder])
        expect(code == 0, "the job should succeed", out)
        expect("verdict" not in out, "no diagnosis for a job that succeeded", out)
        dumps, launcher, problems = [], None, []
        names = sorted(os.listdir(folder))
        expect(names == ["rank%d.json" % r for r in range(NP)], "one dump per rank: %s" % names, out)
        for name in names:
            d = zt.load(os.path.join(folder, name))
            dumps.append(d)
            expect(d.reason == "request" and d.size == NP and d.context == 0, "header of %s" % name, out)
            colls = [e for e in d.entries if e.collective]
            expect([e["seq"] for e in colls] == [1, 2, 3, 4, 5, 6], "collectives #1..#6 in %s" % name, out)
            for e in colls:
                expect(e["op"] == "allreduce" and e["count"] == 8 and e["dtype"] == "float32" and
                       e["redop"] == "sum" and e["state"] == "completed" and e["status"] == "ZC_OK" and
                       e["label"] == "step %d" % e["seq"] and e["bytes"] == 32 and
                       e["transport"] == (TRANSPORT if NP > 1 else "self") and e["algo"],
                       "record %s of %s" % (dict(e), name), out)
                expect(0 < e["t_posted_ns"] <= e["t_started_ns"] <= e["t_done_ns"], "times of %s" % dict(e), out)
            # The ring of sends and receives after allreduce #6, in call order.
            p2p = [e for e in d.entries if not e.collective]
            r = int(name[4:-5])
            expect([(e["op"], e["peer"], e["tag"], e["bytes"]) for e in p2p] ==
                   [("send", (r + 1) % NP, 5, 8), ("recv", (r - 1) % NP, 5, 8)],
                   "the send and the receive in %s" % name, out)
            for e in p2p:
                expect(e["state"] == "completed" and e["status"] == "ZC_OK" and
                       e["transport"] == TRANSPORT and 0 < e["t_started_ns"] <= e["t_done_ns"],
                       "record %s of %s" % (dict(e), name), out)
            expect(p2p[0]["t_started_ns"] >= colls[-1]["t_done_ns"], "the send after allreduce #6", out)
            # Round trip: the text zcomm.trace writes reads back equal.
            text = zt.save(d)
            again = zt.dump.parse(text)
            expect(again == d and zt.save(again) == text, "round trip of %s" % name, out)
        diag = zt.diagnose(dumps)
        expect(diag.verdict() == "no rank is stuck: every recorded operation completed", diag.verdict(), out)
        chrome = zt.to_chrome(dumps)
        json.loads(json.dumps(chrome))
        xs = [e for e in chrome["traceEvents"] if e["ph"] == "X"]
        expect(len(xs) == 8 * NP, "8 operations per rank in the Chrome trace (%d)" % len(xs), out)
        expect({e["pid"] for e in xs} == set(range(NP)), "a process per rank", out)
        # Refused: another version, a missing field.
        bad = json.loads(zt.save(dumps[0]))
        bad["version"] = 99
        try:
            zt.dump.parse(json.dumps(bad))
            expect(False, "version 99 refused", out)
        except zt.DumpError as e:
            expect("version 99" in str(e), str(e), out)
        bad = json.loads(zt.save(dumps[0]))
        del bad["entries"][0]["seq"]
        try:
            zt.dump.parse(json.dumps(bad))
            expect(False, "missing field refused", out)
        except zt.DumpError as e:
            expect("'seq' is missing" in str(e), str(e), out)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if SCENARIO == "ok":
    check_ok()
else:
    check_failure()
print("OK: %s over %s with %d ranks" % (SCENARIO, TRANSPORT, NP))
