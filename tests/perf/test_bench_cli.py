#!/usr/bin/python3
"""zc_coll and zc_p2p as a user meets them, under zcrun on 2 ranks with tiny
sizes: --help, bad flags and values, an empty size range, every dtype/op row
with #wrong 0 and the closing lines, the root column, and the three p2p
tables.

    test_bench_cli.py ZCRUN ZC_COLL ZC_P2P
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ZCRUN, COLL, P2P = sys.argv[1:4]
ENV = dict(os.environ, ZC_SOCKET_IFNAME="lo", ZC_TIMEOUT="60")
DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
          "bfloat16", "float32", "float64", "int16", "uint16", "bool"]
OPS = ["sum", "prod", "min", "max", "avg"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, flush=True)


def run(prog, *args, np_=2, transport="shm"):
    cmd = [ZCRUN, "-np", str(np_), "--no-tag-output", "--timeout", "120",
           "-x", "ZC_TRANSPORT=" + transport, prog] + list(args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=ENV, timeout=180)
    return p.returncode, p.stdout, p.stderr


def rows(text):
    return [l.split() for l in text.splitlines() if l and not l.startswith("#")]


# ---- --help lists every flag, exit 0 -------------------------------------
for prog, flags in (
        (COLL, ["--coll", "-b", "--minbytes", "-e", "--maxbytes", "-f",
                "--stepfactor", "-i", "--stepbytes", "-d", "--datatype", "-o",
                "--op", "-r", "--root", "-n", "--iters", "--min-iters", "-w",
                "--warmup_iters", "--reps", "-a", "--average", "-c", "--check",
                "--place", "--inplace", "--buffers", "--json", "--precise", "-h",
                "--help"]),
        (P2P, ["-t", "--test", "-b", "--min-size", "-e", "--max-size", "-m",
               "-n", "-i", "--iters", "--bw-iters", "--min-iters", "-W",
               "--window", "-w", "-x", "--warmup", "--reps", "--buffers",
               "--mode", "--skip-latency", "--skip-bw", "--json", "--precise",
               "-h", "--help"])):
    name = os.path.basename(prog)
    rc, out, err = run(prog, "--help")
    check(rc == 0, "%s --help exits 0 (got %d: %s)" % (name, rc, err))
    for f in flags:
        check(re.search(r"(^|[\s,])%s([\s,]|$)" % re.escape(f), out, re.M),
              "%s --help names %s" % (name, f))
    check(out.count("usage:") == 1,
          "%s --help printed once (by one rank), not %d times" % (
              name, out.count("usage:")))

    # ---- a bad flag exits 2 and names itself --------------------------------
    rc, out, err = run(prog, "--no-such-flag")
    check(rc == 2, "%s --no-such-flag exits 2 (got %d)" % (name, rc))
    check("%s: unknown flag --no-such-flag" % name in err,
          "%s names the unknown flag: %r" % (name, err))
    rc, out, err = run(prog, "-b", "12Q")
    check(rc == 2 and "bad value for -b: '12Q'" in err,
          "%s -b 12Q: exit 2 naming the value (got %d: %r)" % (name, rc, err))
    rc, out, err = run(prog, "-e")
    check(rc == 2 and "-e needs a value" in err,
          "%s -e without a value: exit 2 (got %d: %r)" % (name, rc, err))
    # ---- -b above -e is an error, not empty output ------------------------
    rc, out, err = run(prog, "-b", "1M", "-e", "1K")
    check(rc != 0 and "larger than -e" in err and not rows(out),
          "%s -b 1M -e 1K fails with a message (got %d: %r %r)" % (
              name, rc, out, err))

rc, out, err = run(COLL, "-o", "bogus")
check(rc == 2 and "bad value for -o: 'bogus'" in err, "zc_coll -o bogus: %r" % err)
rc, out, err = run(COLL, "-r", "7", "--coll", "reduce", "-e", "64")
check(rc == 2 and "bad value for -r: 7" in err, "zc_coll -r 7 on 2 ranks: %r" % err)
rc, out, err = run(COLL, "-b", "1", "-e", "4", "-d", "float64")
check(rc == 2 and "no size" in err, "zc_coll with no usable size: %d %r" % (rc, err))

# ---- -d all -o all: every dtype x op row, #wrong 0, closing lines ---------
with tempfile.TemporaryDirectory() as tmp:
    jp = os.path.join(tmp, "coll.json")
    rc, out, err = run(COLL, "-b", "64", "-e", "256", "-f", "4", "-d", "all",
                       "-o", "all", "-n", "2", "-w", "1", "--reps", "2",
                       "--json", jp)
    check(rc == 0, "zc_coll -d all -o all exits 0 (got %d: %s)" % (rc, err))
    got = rows(out)
    for dt in DTYPES:
        for op in OPS:
            mine = [r for r in got if r[2] == dt and r[3] == op]
            if op == "avg" and not dt.startswith(("float", "bfloat")):
                check(not mine and re.search(r"# allreduce %s avg: skipped" % dt, out),
                      "avg on %s: skipped with a note" % dt)
                continue
            # sizes 64 and 256 bytes
            check(len(mine) == 2, "rows of %s %s: %d, expected 2" % (dt, op, len(mine)))
    for r in got:
        # size count type redop root | time algbw busbw #wrong | in place
        # ... | slowest min max (twice)
        check(len(r) == 19, "a row has 19 columns: %r" % r)
        check(r[4] == "-1", "allreduce has no root (-1): %r" % r)
        check(r[8] == "0" and r[12] == "0", "#wrong 0 out of and in place: %r" % r)
        check(float(r[5]) > 0 and float(r[9]) > 0, "times measured: %r" % r)
    check(re.search(r"^# Avg bus bandwidth\s+: [0-9.e+-]+$", out, re.M),
          "the closing Avg bus bandwidth line")
    check(re.search(r"^# Out of bounds values : 0 OK$", out, re.M),
          "the Out of bounds line")
    check(re.search(r"out-of-place\s+in-place", out), "the two halves' header")
    data = json.load(open(jp))
    check(data["complete"] and data["error"] is None and len(data["results"]) == len(got),
          "JSON complete with one row per printed row")
    check(all(r["wrong"] == 0 and r["time_us"] > 0 and r["ip_time_us"] > 0
              for r in data["results"]), "JSON rows: wrong 0, both halves timed")

# ---- every collective, root column, -r all ---------------------------------
rc, out, err = run(COLL, "--coll", "all", "-r", "all", "-b", "1K", "-e", "1K",
                   "-n", "2", "--reps", "1", "-o", "max", "-d", "int32")
check(rc == 0, "zc_coll --coll all -r all exits 0 (%d: %s)" % (rc, err))
got = rows(out)
for coll in ("allreduce", "broadcast", "reduce", "allgather", "reduce_scatter",
             "alltoall"):
    check(re.search(r"^# Collective: %s, 2 ranks" % coll, out, re.M),
          "a table for %s" % coll)
roots = sorted(r[4] for r in got if r[3] == "none" and r[5] == "N/A")
check(roots == ["0", "1"], "broadcast rows for roots 0 and 1, out-of-place N/A: %r" % roots)
check(sorted(r[4] for r in got if r[3] == "max" and r[4] != "-1") == ["0", "1"],
      "reduce rows for roots 0 and 1")
check(all(r[8] in ("0", "N/A") and r[12] == "0" for r in got), "#wrong 0 everywhere")
check(len(got) == 8, "8 rows (4 collectives + 2 roots x 2 rooted): %d" % len(got))

# ---- --nonblocking: every collective through zc_i* + zc_wait, checked ------
with tempfile.TemporaryDirectory() as tmp:
    jp = os.path.join(tmp, "nb.json")
    # 7 and 259 elements (allgather, reduce_scatter, alltoall: 6 and 258)
    rc, out, err = run(COLL, "--coll", "all", "--nonblocking", "-b", "28", "-e", "1036",
                       "-f", "37", "-n", "3", "--reps", "1", "-d", "int32", "--json", jp)
    check(rc == 0, "zc_coll --nonblocking exits 0 (%d: %s)" % (rc, err))
    check("nonblocking (zc_i* + zc_wait)" in out, "the header names the nonblocking calls")
    got = rows(out)
    check(len(got) == 12, "12 rows (6 collectives x 2 sizes): %d" % len(got))
    check(all(r[8] in ("0", "N/A") and r[12] == "0" for r in got), "#wrong 0 everywhere")
    data = json.load(open(jp))
    check(data["nonblocking"] is True and data["complete"] and len(data["results"]) == 12,
          "the JSON says nonblocking, complete, 12 rows")

# ---- zc_p2p: latency, bw, bibw tables ---------------------------------------
for transport in ("shm", "tcp"):
    rc, out, err = run(P2P, "-t", "all", "-b", "1", "-e", "4K", "-n", "20",
                       "--bw-iters", "2", "-W", "8", "--reps", "2",
                       transport=transport)
    check(rc == 0, "zc_p2p -t all over %s exits 0 (%d: %s)" % (transport, rc, err))
    tables = re.split(r"^# (latency|bw|bibw) \(osu_.*$", out, flags=re.M)
    names = tables[1::2]
    check(names == ["latency", "bw", "bibw"], "three tables in order: %r" % names)
    for name, body in zip(names, tables[2::2]):
        head = "Latency (us)" if name == "latency" else "Bandwidth (MB/s)"
        check(head in body, "%s table header names its unit" % name)
        rs = rows(body)
        check([int(r[0]) for r in rs] == [1 << k for k in range(13)],
              "%s over %s: one row per size 1..4096" % (name, transport))
        check(all(r[-1] == "0" and float(r[1]) > 0 for r in rs),
              "%s over %s: values > 0, #wrong 0" % (name, transport))
    check("# #wrong total: 0 OK" in out, "zc_p2p's closing line")

# ---- --precise: times below 10 us with 3 decimals, the same columns ---------
def decimals(cell):
    return len(cell.split(".")[1]) if "." in cell else 0


def check_decimals(cells, what):
    for c in cells:
        want = 3 if float(c) < 10 else 2
        check(decimals(c) == want, "%s: %s has %d decimals, expected %d" % (
            what, c, decimals(c), want))


for precise in (False, True):
    extra = ["--precise"] if precise else []
    rc, out, err = run(COLL, "-b", "8", "-e", "8", "-n", "20", "--reps", "3", *extra)
    got = rows(out)
    check(rc == 0 and len(got) == 1 and len(got[0]) == 19,
          "zc_coll %s: one row of 19 columns (%d: %r %s)" % (extra, rc, got, err))
    if got and len(got[0]) == 19:
        times = [got[0][i] for i in (5, 9, 13, 14, 15, 16, 17, 18)]
        if precise:
            check_decimals(times, "zc_coll --precise")
        else:
            check(all(decimals(c) == 2 for c in times), "zc_coll: 2 decimals: %r" % times)
    rc, out, err = run(P2P, "-t", "latency", "-b", "8", "-e", "8", "-n", "20", *extra)
    got = rows(out)
    check(rc == 0 and len(got) == 1 and len(got[0]) == 6,
          "zc_p2p %s: one latency row of 6 columns (%d: %r %s)" % (extra, rc, got, err))
    if got and len(got[0]) == 6:
        if precise:
            check_decimals(got[0][1:4], "zc_p2p --precise")
        else:
            check(all(decimals(c) == 2 for c in got[0][1:4]), "zc_p2p: 2 decimals: %r" % got[0])

if failures:
    print("%d check(s) failed" % len(failures))
    sys.exit(1)
print("all checks passed")
