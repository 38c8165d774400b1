"""The dump format: one JSON object per communicator and rank (version 1).

Reading checks the format name and version and every field the analyzer
uses; :func:`save` writes a dump back in the same format, so that
``load(save(d)) == d``.
"""

import json
import os

FORMAT = "zcomm-flight-recorder"
VERSION = 1

# Fields of one record, in the order the library writes them.
ENTRY_FIELDS = ("id", "seq", "op", "dtype", "redop", "count", "bytes", "root", "peer", "tag", "algo",
                "transport", "label", "state", "status", "t_posted_ns", "t_started_ns", "t_done_ns")
# Fields a record may have (absent in dumps of older libraries): "key", the
# key of a parameter-server call (null for other calls).
OPTIONAL_ENTRY_FIELDS = ("key",)
STATES = ("posted", "started", "completed", "failed")
HEADER_FIELDS = ("format", "version", "reason", "job", "comm", "host", "pid", "monotonic_ns",
                 "realtime_ns", "capacity", "recorded", "torn", "failure", "entries")
# Header fields a dump may have (absent in dumps of older libraries, whose
# records were all timed precisely): "clock", "coarse" or "precise"
# (ZC_TRACE_CLOCK), and "clock_resolution_ns", how early a record's time may
# be (1,000,000 for the coarse clock).
OPTIONAL_HEADER_FIELDS = ("clock", "clock_resolution_ns")

# The launcher's own file in a dump folder (written by zcrun), not a dump.
LAUNCHER_FILE = "zcrun-ranks.json"


class DumpError(ValueError):
    """A file that is not a flight-recorder dump of a version this reader knows."""


class Entry(dict):
    """One operation: a dict with the fields of ENTRY_FIELDS and a few helpers."""

    @property
    def collective(self):
        return self["seq"] > 0

    @property
    def ps(self):
        """A parameter-server call (ps_push, ps_pull, ps_ipush, ps_ipull, ps_declare, ps_serve)."""
        return self["op"].startswith("ps_")

    @property
    def finished(self):
        return self["state"] == "completed"

    def call(self):
        """'allreduce #6 (count=8, float32, sum)' or 'recv from 1 (tag 7, 8 bytes)'."""
        op = self["op"]
        if self.collective:
            args = []
            if op != "barrier":
                args.append("count=%d" % self["count"])
                if self["dtype"]:
                    args.append(self["dtype"])
                if self["redop"]:
                    args.append(self["redop"])
            if self["root"] >= 0:
                args.append("root=%d" % self["root"])
            return "%s #%d (%s)" % (op, self["seq"], ", ".join(args)) if args else "%s #%d" % (op, self["seq"])
        if self.ps:
            if self.get("key") is None:
                return op
            if op == "ps_declare":
                return "%s(key %d, count=%d, %s)" % (op, self["key"], self["count"], self["dtype"])
            return "%s(key %d, %d bytes)" % (op, self["key"], self["bytes"])
        way = "to" if op in ("send", "isend") else "from"
        peer = "any source" if self["peer"] < 0 else str(self["peer"])
        return "%s %s %s (tag %d, %d bytes)" % (op, way, peer, self["tag"], self["bytes"])

    def signature(self):
        """What every rank must agree on for a collective."""
        return (self["op"], self["dtype"], self["redop"], self["count"], self["root"])


class Dump:
    """One file: the communicator's identity, clocks and records."""

    def __init__(self, doc, path=None):
        self.path = path
        self.doc = doc
        self.entries = [Entry(e) for e in doc["entries"]]
        comm = doc["comm"]
        self.job = doc["job"]
        self.context = comm["context"]
        self.rank = comm["rank"]
        self.size = comm["size"]
        self.world_rank = comm["world_rank"]
        self.transport = comm["transport"]
        self.reason = doc["reason"]
        self.failure = doc["failure"]
        self.host = doc["host"]
        self.pid = doc["pid"]

    @property
    def clock(self):
        """"coarse" or "precise": where the records' times come from."""
        return self.doc.get("clock", "precise")

    @property
    def resolution_ns(self):
        """How early a record's time may be (0 to this many nanoseconds)."""
        return self.doc.get("clock_resolution_ns", 1)

    @property
    def comm_key(self):
        return (self.job, self.context, self.size)

    def to_epoch_ns(self, t):
        """A record's monotonic time as wall-clock nanoseconds (comparable across hosts
        as far as their clocks agree)."""
        return t - self.doc["monotonic_ns"] + self.doc["realtime_ns"] if t else 0

    def age_s(self, t):
        """Seconds from monotonic time t to the dump."""
        return (self.doc["monotonic_ns"] - t) / 1e9 if t else None

    def __eq__(self, other):
        return isinstance(other, Dump) and self.doc == other.doc

    def __repr__(self):
        return "Dump(job=%s, context=%d, rank=%d/%d, %d entries)" % (
            self.job, self.context, self.rank, self.size, len(self.entries))


def _check(doc, where):
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DumpError("%s: not a zcomm flight-recorder dump (format %r)" %
                        (where, doc.get("format") if isinstance(doc, dict) else None))
    if doc.get("version") != VERSION:
        raise DumpError("%s: dump format version %r; this reader knows version %d" %
                        (where, doc.get("version"), VERSION))
    for f in HEADER_FIELDS:
        if f not in doc:
            raise DumpError("%s: field %r is missing" % (where, f))
    for f in ("context", "rank", "size", "world_rank", "transport"):
        if f not in doc["comm"]:
            raise DumpError("%s: field comm.%s is missing" % (where, f))
    for i, e in enumerate(doc["entries"]):
        for f in ENTRY_FIELDS:
            if f not in e:
                raise DumpError("%s: entry %d: field %r is missing" % (where, i, f))
        if e["state"] not in STATES:
            raise DumpError("%s: entry %d: unknown state %r" % (where, i, e["state"]))


def parse(text, where="<text>"):
    """A Dump from JSON text."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise DumpError("%s: not JSON: %s" % (where, e)) from None
    _check(doc, where)
    return Dump(doc, where)


def load(path):
    """The Dump in file `path`."""
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), path)


def save(dump, path=None):
    """The dump's JSON text (written to `path` when given)."""
    text = json.dumps(dump.doc, indent=None, separators=(",", ":")) + "\n"
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return text


def load_dir(folder):
    """(dumps, launcher, problems): every dump in folder (files zctrace-*.json),
    zcrun's record of the ranks' processes (a dict, or None), and a line per
    file that could not be read."""
    dumps, problems, launcher = [], [], None
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name == LAUNCHER_FILE:
            try:
                with open(path, encoding="utf-8") as f:
                    launcher = json.load(f)
            except (OSError, ValueError) as e:
                problems.append("%s: %s" % (path, e))
            continue
        if not (name.startswith("zctrace-") and name.endswith(".json")):
            continue
        try:
            dumps.append(load(path))
        except (OSError, DumpError) as e:
            problems.append(str(e))
    return dumps, launcher, problems
