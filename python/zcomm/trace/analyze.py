"""The job's diagnosis from its ranks' dumps: which rank diverged first, in
which call, who waits for whom, and which arguments disagree.

The collectives of a communicator carry a sequence number that is the same
on every rank (the n-th collective of each rank meets the n-th of the
others), so the ranks' records line up by it. A rank's *current call* is its
oldest record that did not complete: still posted or started (the rank is
in it now), or failed (the rank was in it when it timed out, lost a peer or
was aborted).
"""

from collections import defaultdict


def _ranks(rs):
    rs = sorted(rs)
    return ("rank %d" % rs[0]) if len(rs) == 1 else "ranks " + ", ".join(str(r) for r in rs)


def _secs(s):
    return "%.1f s" % s if s is not None else "?"


class RankView:
    """One rank's records of one communicator."""

    def __init__(self, dump):
        self.dump = dump
        self.rank = dump.rank
        self.entries = sorted(dump.entries, key=lambda e: e["id"])
        self.colls = {e["seq"]: e for e in self.entries if e.collective}
        self.last_seq = max(self.colls) if self.colls else 0
        self.first_seq = min(self.colls) if self.colls else 0
        self.current = self._current()

    def _current(self):
        # A started or failed record is where the rank is (or was); a
        # nonblocking request merely posted may legitimately wait for a later
        # wait, so it counts only when nothing else is open.
        posted = None
        for e in self.entries:
            if e["state"] in ("started", "failed"):
                return e
            if e["state"] == "posted" and posted is None:
                posted = e
        return posted

    def last_completed(self):
        done = [e for e in self.entries if e["state"] == "completed"]
        return done[-1] if done else None

    def describe_current(self):
        e = self.current
        if e is None:
            last = self.last_completed()
            if last is None:
                return "no operation recorded"
            return "nothing pending; last call %s completed %s before the dump" % (
                last.call(), _secs(self.dump.age_s(last["t_done_ns"])))
        since = e["t_started_ns"] or e["t_posted_ns"]
        if e["state"] == "failed":
            took = (e["t_done_ns"] - since) / 1e9 if e["t_done_ns"] and since else None
            text = "failed in %s after %s: %s" % (e.call(), _secs(took), e["status"])
        else:
            text = "waits in %s (%s, for %s)" % (e.call(), e["state"], _secs(self.dump.age_s(since)))
        if e["label"]:
            text += " [label %s]" % e["label"]
        return text


class CommDiagnosis:
    """The findings for one communicator (all dumps with the same job, context and size)."""

    def __init__(self, dumps, launcher=None):
        d0 = dumps[0]
        self.job, self.context, self.size = d0.job, d0.context, d0.size
        self.transport = d0.transport
        self.views = {}
        for d in dumps:  # a rank dumped twice: the later dump
            v = self.views.get(d.rank)
            if v is None or d.doc["monotonic_ns"] >= v.dump.doc["monotonic_ns"]:
                self.views[d.rank] = RankView(d)
        self.missing = [r for r in range(self.size) if r not in self.views]
        self.launcher = launcher
        self.findings = []  # (priority, text): lower first
        self.mismatch_seq = None
        self.divergence_seq = None
        self._find_mismatch()
        self._find_divergence()
        self._find_missing()
        self._find_p2p_waits()
        self._find_ps_waits()
        self._find_common_wait()
        self.slowest = self._slowest()
        self.findings.sort(key=lambda f: f[0])

    # -- findings --

    def _find_mismatch(self):
        views = list(self.views.values())
        if len(views) < 2:
            return
        lo = max(v.first_seq for v in views)
        hi = min(v.last_seq for v in views)
        for s in range(max(lo, 1), hi + 1):
            if any(s not in v.colls for v in views):
                continue
            groups = defaultdict(list)
            for v in views:
                groups[v.colls[s].signature()].append(v.rank)
            if len(groups) < 2:
                continue
            parts = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1]))
            calls = ["%s called %s" % (_ranks(rs), self.views[rs[0]].colls[s].call()) for _, rs in parts]
            odd = parts[-1][1]
            text = "collective #%d does not match: %s" % (s, "; ".join(calls))
            if len(parts[0][1]) > len(odd):
                text += " (%s differ%s from the others)" % (_ranks(odd), "s" if len(odd) == 1 else "")
            self.mismatch_seq = s
            self.findings.append((0, text))
            return

    def _find_divergence(self):
        views = list(self.views.values())
        if len(views) < 2 or len({v.last_seq for v in views}) < 2:
            return
        s = min(v.last_seq for v in views) + 1
        ahead = [v for v in views if v.last_seq >= s]
        behind = sorted(v.rank for v in views if v.last_seq < s)
        if self.mismatch_seq is not None and self.mismatch_seq < s:
            return  # the mismatch came first and explains it
        call = ahead[0].colls[s].call() if s in ahead[0].colls else "collective #%d" % s
        waiting = sorted(v.rank for v in ahead if v.current is not None and v.current.get("seq") == s)
        text = "%s never posted %s" % (_ranks(behind), call)
        if waiting:
            text += "; %s wait%s for %s there" % (_ranks(waiting), "s" if len(waiting) == 1 else "",
                                                 "it" if len(behind) == 1 else "them")
        else:
            text += "; %s posted it" % _ranks(v.rank for v in ahead)
        self.divergence_seq = s
        self.findings.append((1, text))

    def _fate(self, rank):
        if not self.launcher:
            return None
        for p in self.launcher.get("ranks", []):
            if p.get("rank") == self.views_world_rank(rank):
                return p
        return None

    def views_world_rank(self, rank):
        # zcrun knows processes by their rank in the job; the world
        # communicator's ranks are those (context 0), others are not mapped.
        return rank if self.context == 0 else None

    def _find_missing(self):
        if not self.missing:
            return
        waiting = sorted(v.rank for v in self.views.values() if v.current is not None)
        for r in self.missing:
            fate = self._fate(r)
            why = "wrote no dump"
            if fate:
                state = fate.get("state")
                if state == "stopped":
                    why += " (its process %d on %s is stopped: SIGSTOP or a debugger)" % (fate.get("pid", 0), fate.get("host", "?"))
                elif state == "exited":
                    why += " (its process exited: %s)" % fate.get("detail", "")
                elif state == "running":
                    why += " (its process %d did not answer SIGUSR2)" % fate.get("pid", 0)
                elif fate.get("detail"):
                    why += " (%s)" % fate["detail"]
            text = "rank %d %s" % (r, why)
            if waiting:
                cur = {self.views[w].current.call() for w in waiting}
                text += "; %s wait%s in %s" % (_ranks(waiting), "s" if len(waiting) == 1 else "",
                                               " / ".join(sorted(cur)))
            self.findings.append((2, text))

    def _find_p2p_waits(self):
        edges = {}
        for v in self.views.values():
            e = v.current
            if e is not None and not e.collective and e["peer"] >= 0 and e["state"] != "completed":
                edges[v.rank] = e
        seen = set()
        for start in sorted(edges):
            if start in seen:
                continue
            path, r = [], start
            while r in edges and r not in path:
                path.append(r)
                r = edges[r]["peer"]
            seen.update(path)
            if r in path:  # a cycle from r
                cyc = path[path.index(r):]
                waits = ", ".join("rank %d waits in %s" % (x, edges[x].call()) for x in cyc)
                self.findings.append((1, "send/recv deadlock: %s: each waits for the next, none can go on" % waits))
                continue
            # The chain ends at a rank that does not wait in a p2p call.
            last = path[-1]
            e = edges[last]
            peer = e["peer"]
            if peer in self.views:
                pv = self.views[peer]
                self.findings.append((3, "rank %d waits in %s; rank %d: %s" % (
                    last, e.call(), peer, pv.describe_current())))
            else:
                self.findings.append((3, "rank %d waits in %s; rank %d wrote no dump" % (last, e.call(), peer)))

    def _find_ps_waits(self):
        """Parameter-server rounds: a synchronous pull of a key's n-th round waits
        for every worker's n-th push of it, so a worker that waits there while
        another pushed the key fewer times is waiting for that one."""
        pushes = {}  # rank -> {key: pushes made}; only where the ring kept them all
        for v in self.views.values():
            ps = [e for e in v.entries if e.ps and e.get("key") is not None]
            if ps and v.dump.doc["recorded"] <= v.dump.doc["capacity"]:
                counts = defaultdict(int)
                for e in ps:
                    if e["op"] in ("ps_push", "ps_ipush"):
                        counts[e["key"]] += 1
                pushes[v.rank] = counts
        waits = defaultdict(list)  # key -> [(rank, call)] of ranks stuck in a PS call on it
        for v in self.views.values():
            e = v.current
            if e is not None and e.ps and e.get("key") is not None and e["state"] != "completed":
                waits[e["key"]].append((v.rank, e))
        for key in sorted(waits):
            stuck = waits[key]
            need = max(pushes.get(r, {}).get(key, 0) for r, _ in stuck)
            behind = sorted(r for r, c in pushes.items() if c.get(key, 0) < need)
            if not behind:
                continue
            done = {r: pushes[r].get(key, 0) for r in behind}
            how = "; ".join("rank %d pushed it %d time%s" % (r, n, "" if n == 1 else "s")
                            for r, n in sorted(done.items()))
            waiting = sorted(r for r, _ in stuck)
            calls = " / ".join(sorted({c.call() for _, c in stuck}))
            self.findings.append((1, "%s never pushed key %d for round %d (%s); %s wait%s in %s" % (
                _ranks(behind), key, need, how, _ranks(waiting), "s" if len(waiting) == 1 else "", calls)))

    def _find_common_wait(self):
        if self.findings:
            return
        cur = [v for v in self.views.values() if v.current is not None]
        if not cur:
            self.findings.append((9, "no rank is stuck: every recorded operation completed"))
            return
        calls = defaultdict(list)
        for v in cur:
            calls[v.current.call()].append(v.rank)
        for call, rs in sorted(calls.items(), key=lambda kv: kv[1]):
            self.findings.append((4, "%s %s in %s" % (_ranks(rs), "is" if len(rs) == 1 else "are", call)))
        first = self._first_failure()
        if first:
            self.findings.append((4, "first failure: rank %d: %s" % first))

    def _first_failure(self):
        best = None
        for v in self.views.values():
            f = v.dump.failure
            if not f:
                continue
            e = next((x for x in v.entries if x["id"] == f["id"]), None)
            t = v.dump.to_epoch_ns(e["t_done_ns"]) if e else 0
            if best is None or (t and t < best[0]):
                best = (t, v.rank, f["message"])
        return (best[1], best[2]) if best else None

    def _slowest(self):
        views = list(self.views.values())
        if len(views) < 2:
            return None
        late = defaultdict(float)
        last_count = defaultdict(int)
        n = 0
        common = set.intersection(*(set(v.colls) for v in views))
        for s in sorted(common):
            es = {v.rank: v.colls[s] for v in views}
            if any(e["state"] != "completed" or not e["t_started_ns"] for e in es.values()):
                continue
            t = {r: self.views[r].dump.to_epoch_ns(e["t_started_ns"]) for r, e in es.items()}
            first = min(t.values())
            for r, x in t.items():
                late[r] += (x - first) / 1e6
            last_count[max(t, key=t.get)] += 1
            n += 1
        if n == 0:
            return None
        r = max(late, key=late.get)
        return (r, last_count[r], n, late[r] / n)

    # -- output --

    def verdict(self):
        return self.findings[0][1] if self.findings else "nothing recorded"

    def lines(self):
        head = "communicator %d of job %s: %d rank%s over %s; dumps from %d" % (
            self.context, self.job or "local", self.size, "" if self.size == 1 else "s", self.transport,
            len(self.views))
        if self.missing:
            head += " (none from %s)" % _ranks(self.missing)
        out = [head, "verdict: " + self.verdict()]
        for _, text in self.findings[1:]:
            out.append("  " + text)
        if self.divergence_seq is not None:
            out.append("  first divergence: collective #%d" % self.divergence_seq)
        elif self.mismatch_seq is not None:
            out.append("  first divergence: collective #%d" % self.mismatch_seq)
        for r in sorted(self.views):
            v = self.views[r]
            line = "  rank %d (pid %d on %s): %s" % (r, v.dump.pid, v.dump.host, v.describe_current())
            out.append(line)
            if v.dump.failure and v.current is not None and v.current["state"] == "failed":
                out.append("    " + v.dump.failure["message"][:300])
        if self.slowest:
            r, k, n, ms = self.slowest
            out.append("  slowest rank: %d (last to start %d of %d collectives; %.3f ms behind the first on "
                       "average)" % (r, k, n, ms))
        return out

    @property
    def interesting(self):
        return bool(self.findings) and self.findings[0][0] < 9


class Diagnosis:
    """Every communicator's findings; the world communicator's first."""

    def __init__(self, comms, problems=()):
        self.comms = comms
        self.problems = list(problems)

    def _by_weight(self):
        # The communicator with the most telling first finding first (a
        # divergence or a mismatch before a rank that merely wrote no dump:
        # ranks that failed in a parameter server's communicator exit without
        # dumping the world's); the world's first among equals.
        return sorted(self.comms, key=lambda c: c.findings[0][0] if c.findings else 99)

    def verdict(self):
        for c in self._by_weight():
            if c.interesting:
                return c.verdict()
        return self.comms[0].verdict() if self.comms else "no dumps"

    def lines(self, all_comms=False):
        out = []
        comms = self._by_weight()
        shown = [c for c in comms if all_comms or c.interesting] or comms[:1]
        for c in shown:
            out.extend(c.lines())
        hidden = len(self.comms) - len(shown)
        if hidden:
            out.append("(%d more communicator%s with nothing pending; --all shows them)" % (
                hidden, "" if hidden == 1 else "s"))
        for p in self.problems:
            out.append("unreadable: " + p)
        if not self.comms:
            out.append("no flight-recorder dumps found")
        return out


def diagnose(dumps, launcher=None, problems=()):
    """The Diagnosis of a job from its dumps (zcomm.trace.load_dir gives them)."""
    groups = defaultdict(list)
    for d in dumps:
        groups[d.comm_key].append(d)
    comms = [CommDiagnosis(ds, launcher) for _, ds in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0] or "", kv[0][2]))]
    return Diagnosis(comms, problems)
