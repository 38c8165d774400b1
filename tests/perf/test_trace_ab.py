"""perf/trace_ab as a user runs it: every mode on 2 ranks (the line it
prints, with ratios that are numbers), and its usage errors."""

import re
import subprocess
import sys

zcrun, trace_ab = sys.argv[1], sys.argv[2]
fails = []
for kind, name in (("allreduce", "allreduce"), ("varied", "allreduce (max, min in turn)"),
                   ("p2p", "send/recv one-way")):
    r = subprocess.run([zcrun, "-np", "2", trace_ab, kind, "6", "20"], capture_output=True, text=True, timeout=100)
    line = r.stdout.strip()
    m = re.search(r"%s 8 B, 2 ranks, 6 pairs of 20 calls: recorder on ([\d.]+) ns, off ([\d.]+) ns \(medians\); "
                  r"on/off per pair min ([\d.]+) median ([\d.]+) max ([\d.]+)$" % re.escape(name), line)
    if r.returncode != 0 or not m:
        fails.append("%s: exit %d, printed %r, stderr %r" % (kind, r.returncode, line, r.stderr[-500:]))
        continue
    on, off, lo, med, hi = map(float, m.groups())
    if not (on > 0 and off > 0 and 0 < lo <= med <= hi):
        fails.append("%s: figures out of order: %s" % (kind, line))
r = subprocess.run([trace_ab, "allreduce", "1"], capture_output=True, text=True, timeout=30)
if r.returncode != 2 or "usage" not in r.stderr:
    fails.append("bad rounds: exit %d, stderr %r" % (r.returncode, r.stderr))
r = subprocess.run([trace_ab, "allreducee"], capture_output=True, text=True, timeout=30)
if r.returncode != 2 or "unknown mode 'allreducee'" not in r.stderr:
    fails.append("bad mode: exit %d, stderr %r" % (r.returncode, r.stderr))
for f in fails:
    print("FAIL:", f)
print("OK" if not fails else "%d failed" % len(fails))
sys.exit(1 if fails else 0)
