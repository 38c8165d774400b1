"""Horovod's elastic API with a replacement (docs/elastic.md): under zcrun
--elastic -np 4 --min-np 3 --max-np 4, rank 3 is killed in the middle of
epoch 1; the survivors roll back to the last commit and shrink to 3 ranks;
zcrun starts a replacement, which joins at the start of epoch 2
(HostsUpdatedInterrupt on every survivor, a grow, the state synced to the
newcomer). Checked: the job exits 0, the survivors and the newcomer end on
4 ranks with parameters bitwise identical, and bitwise equal to the
reference of the same membership schedule (4 ranks, 3 from the last commit
before the kill, 4 from epoch 2), computed here (exact: integer gradients,
see test_hvd_elastic.py).

Usage: test_hvd_elastic_grow.py shm|tcp"""
import json
import os
import re
import subprocess
import sys
import time

import hvd_harness
import test_hvd_elastic as base


def main():
    hvd_harness.require_torch()
    transport = sys.argv[1] if len(sys.argv) > 1 else "shm"
    t0 = time.monotonic()
    cmd = [os.environ["ZCRUN"], "--timeout", "200", "-np", str(base.WORLD), "--min-np",
           str(base.WORLD - 1), "--max-np", str(base.WORLD), sys.executable,
           os.path.join(hvd_harness.HERE, "hvd_elastic_grow_worker.py")]
    env = hvd_harness._env({"ZC_TRANSPORT": transport, "ZC_TIMEOUT": "60"})
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=230, env=env)
    out = p.stdout + p.stderr
    results = [json.loads(m) for m in re.findall(r"RESULT (\{.*\})", out)]
    fail = []
    if p.returncode != 0:
        fail.append("zcrun exited %d" % p.returncode)
    if sorted(r["rank"] for r in results) != list(range(base.WORLD)):
        fail.append("ranks that finished: %s" % sorted(r["rank"] for r in results))
    if [r["joiner"] for r in sorted(results, key=lambda r: r["rank"])] != [False] * 3 + [True]:
        fail.append("want ranks 0-2 the survivors and rank 3 the newcomer: %s"
                    % [(r["rank"], r["joiner"]) for r in results])
    last_commit = (base.KILL_AT[0], base.KILL_AT[1] - base.KILL_AT[1] % base.COMMIT_EVERY)
    want = [(0, 0, base.WORLD), last_commit + (base.WORLD - 1,), (2, 0, base.WORLD)]
    for r in results:
        sched = [tuple(x) for x in r["schedule"]]
        if r["size"] != base.WORLD:
            fail.append("rank %d ends on %d ranks" % (r["rank"], r["size"]))
        if r["joiner"]:
            if sched != want[2:]:
                fail.append("the newcomer started at %s, want %s" % (sched, want[2:]))
            continue
        if sched != want:
            fail.append("rank %d's schedule %s, want %s" % (r["rank"], sched, want))
        if r["interrupts"] != [False]:
            fail.append("rank %d: HostsUpdatedInterrupt(skip_sync) seen: %s"
                        % (r["rank"], r["interrupts"]))
        if not r["errors"]:
            fail.append("rank %d saw no HorovodInternalError" % r["rank"])
    if not fail:
        base.check_reference_params(results, want, fail)
    if fail:
        print(out[-20000:])
        raise SystemExit("FAIL (%s): %s" % (transport, "\n".join(fail)))
    print("elastic DistributedOptimizer with a replacement (%s): schedule %s, parameters "
          "bitwise equal to the reference on 4 ranks (%.1f s)"
          % (transport, want, time.monotonic() - t0))


if __name__ == "__main__":
    main()
