"""zcomm.trace's analyzer on dumps made here (no job): the cases the
end-to-end scenarios do not reach - rings that wrapped at different points,
a rank that dumped twice, communicators other than the world, a rank whose
receive waits for a rank that is not in any call, the slowest rank, and the
Chrome export's layout."""

import sys

import zcomm.trace as zt
from zcomm.trace.dump import Dump

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def entry(id_, seq, op="allreduce", state="completed", t=0, peer=-1, tag=-1, count=8, label="", status=None):
    return {"id": id_, "seq": seq, "op": op, "dtype": "float32" if seq else None, "redop": "sum" if op == "allreduce" else None,
            "count": count, "bytes": count * 4 if seq else count, "root": -1, "peer": peer, "tag": tag, "algo": "ring" if seq else None,
            "transport": "shm", "label": label, "state": state,
            "status": status or ("ZC_ERR_TIMEOUT" if state == "failed" else "ZC_OK"),
            "t_posted_ns": t, "t_started_ns": t, "t_done_ns": t + 1000 if state in ("completed", "failed") else 0}


def dump(rank, size, entries, context=0, now=10**12, failure=None):
    return Dump({"format": zt.FORMAT, "version": zt.VERSION, "reason": "signal", "job": "j",
                 "comm": {"context": context, "rank": rank, "size": size, "world_rank": rank, "transport": "shm"},
                 "host": "h", "pid": 100 + rank, "monotonic_ns": now, "realtime_ns": now, "capacity": 4,
                 "recorded": len(entries), "torn": 0, "failure": failure, "entries": entries})


# Rings that wrapped differently: rank 0 keeps #7..#10, rank 1 #5..#10, rank 2
# #8..#9 and never posted #10.
d = [dump(0, 3, [entry(i, i, t=i * 10**6) for i in range(7, 10)] + [entry(10, 10, state="started", t=10 * 10**6, label="fc2")]),
     dump(1, 3, [entry(i, i, t=i * 10**6 + 500) for i in range(5, 10)] + [entry(10, 10, state="started", t=10 * 10**6)]),
     dump(2, 3, [entry(i, i, t=i * 10**6 + 9000) for i in range(8, 10)])]
diag = zt.diagnose(d)
v = diag.verdict()
check(v.startswith("rank 2 never posted allreduce #10 (count=8, float32, sum); ranks 0, 1 wait for it there"), v)
lines = "\n".join(diag.lines())
check("[label fc2]" in lines, lines)
check("slowest rank: 2 (last to start 2 of 2 collectives" in lines, lines)

# The same rank dumped twice (a failure, then SIGUSR2): the later dump counts.
early = dump(2, 3, [entry(i, i, t=i) for i in range(8, 10)], now=10**11)
late = dump(2, 3, [entry(i, i, t=i) for i in range(8, 11)], now=2 * 10**12)
diag = zt.diagnose([d[0], d[1], early, late])
check(diag.verdict().startswith("ranks 0, 1 are in allreduce #10"), diag.verdict())

# A mismatch before the point where ranks stop agreeing wins.
d = [dump(0, 2, [entry(1, 1), entry(2, 2, state="failed")]),
     dump(1, 2, [entry(1, 1), entry(2, 2, op="allgather", state="failed")])]
v = zt.diagnose(d).verdict()
check(v == "collective #2 does not match: rank 0 called allreduce #2 (count=8, float32, sum); "
           "rank 1 called allgather #2 (count=8, float32)", v)

# A receive waiting for a rank that waits nowhere; a split communicator.
d = [dump(0, 2, [entry(1, 0, op="recv", state="started", peer=1, tag=3)], context=1),
     dump(1, 2, [entry(1, 0, op="send", peer=0, tag=4)], context=1)]
diag = zt.diagnose(d)
v = diag.verdict()
check(v.startswith("rank 0 waits in recv from 1 (tag 3, 8 bytes); rank 1: nothing pending; last call send to 0 "
                   "(tag 4, 8 bytes) completed"), v)
check(diag.comms[0].context == 1, "context 1")

# No dump from a rank, and zcrun's word on it.
d = [dump(0, 2, [entry(1, 1, state="failed")], failure={"id": 1, "status": "ZC_ERR_TIMEOUT", "message": "m"})]
v = zt.diagnose(d, {"ranks": [{"rank": 1, "pid": 7, "host": "h", "state": "exited", "detail": "killed by SIGKILL (9)"}]}).verdict()
check(v == "rank 1 wrote no dump (its process exited: killed by SIGKILL (9)); rank 0 waits in allreduce #1 "
           "(count=8, float32, sum)", v)

# Chrome: a process per rank, collectives and p2p on rows of their communicator.
d = [dump(0, 2, [entry(1, 1, t=5000), entry(2, 0, op="send", peer=1, tag=0, t=7000)], context=2),
     dump(1, 2, [entry(1, 1, t=6000, state="started")], context=2)]
c = zt.to_chrome(d)
xs = [e for e in c["traceEvents"] if e["ph"] == "X"]
check(sorted((e["pid"], e["tid"], e["ts"]) for e in xs) == [(0, 4, 0.0), (0, 5, 2.0), (1, 4, 1.0)], xs)
open_op = [e for e in xs if e["pid"] == 1][0]
check(open_op["name"].endswith("[started]") and open_op["dur"] > 0, open_op)
# Dumps without a clock field are precise; the export carries the coarsest resolution.
check(d[0].clock == "precise" and d[0].resolution_ns == 1 and c["otherData"]["clock_resolution_us"] == 0.001,
      c["otherData"])
d[1].doc.update(clock="coarse", clock_resolution_ns=10**6)
check(zt.to_chrome(d)["otherData"]["clock_resolution_us"] == 1000.0, zt.to_chrome(d)["otherData"])

# The Python binding: a communicator of one rank, labelled calls, a dump on
# request; without a path and without ZC_TRACE_DIR it is refused.
import os
import tempfile

import numpy as np
import zcomm

os.environ.pop("ZC_TRACE_DIR", None)
with zcomm.init() as comm:
    zcomm.trace_label("warm-up")
    comm.allreduce(np.arange(5, dtype=np.float64))
    zcomm.trace_label(None)
    comm.barrier()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mine.json")
        comm.dump_trace(path)
        mine = zt.load(path)
        ops = [(e["op"], e["seq"], e["count"], e["dtype"], e["label"], e["state"]) for e in mine.entries]
        check(ops == [("allreduce", 1, 5, "float64", "warm-up", "completed"),
                      ("barrier", 2, 0, None, "", "completed")], ops)
        check(mine.size == 1 and mine.reason == "request" and mine.transport == "self", mine)
        # The default clock, and its times in order within each record.
        check(mine.clock == "coarse" and mine.resolution_ns == 10**6, (mine.clock, mine.resolution_ns))
        check(all(0 < e["t_posted_ns"] <= e["t_started_ns"] <= e["t_done_ns"] for e in mine.entries),
              mine.entries)
    try:
        comm.dump_trace()
        check(False, "dump_trace() without ZC_TRACE_DIR should fail")
    except zcomm.Error as e:
        check("ZC_TRACE_DIR is not set" in str(e), str(e))

if FAILS:
    sys.exit(1)
print("OK")
