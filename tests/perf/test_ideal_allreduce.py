#!/usr/bin/python3
"""perf/ideal_allreduce as the suite runs it: out of place and in place, 1 to
5 ranks as threads (odd counts: the last slice is the longest), per-run
statistics and --reps (the mean of each repetition's runs, the statistic
zc_coll reports), the JSON it writes, and bad arguments.

    test_ideal_allreduce.py IDEAL_ALLREDUCE
"""
import json
import os
import subprocess
import sys
import tempfile

IDEAL = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, flush=True)


def run(*args):
    p = subprocess.run([IDEAL] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def triple_ok(t):
    return len(t) == 3 and 0 < t[0] <= t[1] <= t[2]


with tempfile.TemporaryDirectory() as tmp:
    for ranks in (1, 2, 3, 5):
        for inplace in (False, True):
            for reps in (None, 2):
                what = "%d ranks, %s, %s" % (
                    ranks, "in place" if inplace else "out of place",
                    "--reps %d" % reps if reps else "per run")
                jp = os.path.join(tmp, "r.json")
                # 4100 B is not a power of two of floats' 64-byte blocks:
                # the last slice takes the remainder.
                args = ["--ranks", str(ranks), "-b", "4100", "-e", "16400",
                        "-n", "3", "--json", jp]
                args += ["--inplace"] if inplace else []
                args += ["--reps", str(reps)] if reps else []
                rc, out, err = run(*args)
                check(rc == 0, "%s: exit 0 (got %d: %s)" % (what, rc, err))
                if rc:
                    continue
                head = out.splitlines()[0]
                check(("%d reps of 3 runs" % reps if reps else "3 runs") in head,
                      "%s: the header names the statistic: %s" % (what, head))
                with open(jp) as f:
                    doc = json.load(f)
                check(doc.get("complete") is True, what + ": JSON complete")
                check(doc.get("reps") == (reps or 0), what + ": JSON reps")
                check(("over reps" if reps else "over runs") in doc.get("statistic", ""),
                      what + ": JSON statistic " + str(doc.get("statistic")))
                sizes = [r["size"] for r in doc["results"]]
                check(sizes == [4100, 8200, 16400], what + ": sizes %s" % sizes)
                for r in doc["results"]:
                    check(r["wrong"] == 0, "%s: %d B: no wrong sums" % (what, r["size"]))
                    check(triple_ok(r["plain_us"]), "%s: %d B: plain min<=median<=max %s"
                          % (what, r["size"], r["plain_us"]))
                    if inplace:
                        check(r["nt_us"] == [0, 0, 0] and r["best_us"] == r["plain_us"][1],
                              "%s: %d B: in place has plain stores only" % (what, r["size"]))
                    else:
                        check(triple_ok(r["nt_us"]), "%s: %d B: non-temporal min<=median<=max %s"
                              % (what, r["size"], r["nt_us"]))
                        check(r["best_us"] == min(r["plain_us"][1], r["nt_us"][1]),
                              "%s: %d B: best_us is the smaller median" % (what, r["size"]))

for bad in (["--reps", "-1"], ["--reps", "x"], ["--ranks", "0"], ["-n", "0"],
            ["-b", "1M", "-e", "64K"], ["--frobnicate"]):
    rc, out, err = run(*bad)
    check(rc == 2 and ("usage" in err or "error" in err), "%s: exit 2 with an error (got %d: %s)"
          % (" ".join(bad), rc, err.strip()))

if failures:
    print("%d checks failed" % len(failures))
    sys.exit(1)
print("ideal_allreduce: every check passed")
