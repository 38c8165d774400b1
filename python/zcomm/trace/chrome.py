"""Every rank's operations as one Chrome trace (chrome://tracing, Perfetto):
a process per rank, a row for collectives and one for sends and receives
per communicator; operations still open at the dump end at the dump.
With the coarse clock (the default, ZC_TRACE_CLOCK) times are to about a
millisecond: calls shorter than that show with no length."""


def to_chrome(dumps):
    """The trace as a dict ({"traceEvents": [...]}), times in microseconds from
    the earliest record."""
    events = []
    starts = [d.to_epoch_ns(e["t_posted_ns"]) for d in dumps for e in d.entries if e["t_posted_ns"]]
    t0 = min(starts) if starts else 0
    for d in dumps:
        pid = d.world_rank
        events.append({"ph": "M", "name": "process_name", "pid": pid,
                       "args": {"name": "rank %d (%s, pid %d)" % (d.world_rank, d.host, d.pid)}})
        for tid, what in ((2 * d.context, "collectives"), (2 * d.context + 1, "send/recv")):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": "communicator %d %s" % (d.context, what)}})
        end_of_dump = d.to_epoch_ns(d.doc["monotonic_ns"])
        for e in d.entries:
            begin = d.to_epoch_ns(e["t_started_ns"] or e["t_posted_ns"])
            if not begin:
                continue
            end = d.to_epoch_ns(e["t_done_ns"]) if e["t_done_ns"] else end_of_dump
            name = e.call()
            if e["state"] != "completed":
                name += " [%s]" % (e["state"] if e["state"] != "failed" else e["status"])
            args = {k: e[k] for k in ("id", "seq", "op", "dtype", "redop", "count", "bytes", "root", "peer",
                                      "tag", "algo", "transport", "label", "state", "status")}
            args["comm_rank"] = d.rank
            events.append({"ph": "X", "name": name, "cat": e["op"], "pid": pid,
                           "tid": 2 * d.context + (0 if e.collective else 1),
                           "ts": (begin - t0) / 1e3, "dur": max(end - begin, 0) / 1e3, "args": args})
    resolution = max((d.resolution_ns for d in dumps), default=1)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"clock_resolution_us": resolution / 1e3}}
