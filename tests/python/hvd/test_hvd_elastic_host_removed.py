"""Horovod's elastic API when a host leaves the discovery script's output
(docs/launcher.md, "Elastic jobs"): zcrun --elastic -np 4 --min-np 3
-H localhost:3,gone:1 (host "gone" through --rsh "env ZC_FAKE_HOST={host}",
on this machine really) with a script that lists localhost:3 and gone:1
until rank 0 makes a cue file at a commit. zcrun stops rank 3, on "gone";
the others get HorovodInternalError, roll back to that commit, shrink to 3
ranks and finish. Checked: zcrun exits 0 and names the host that left, the
3 survivors end on 3 ranks with parameters bitwise identical and bitwise
equal to the reference of the schedule (4 ranks, 3 from that commit)
computed here (exact: integer gradients, see test_hvd_elastic.py).

Usage: test_hvd_elastic_host_removed.py shm|tcp"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import hvd_harness
import test_hvd_elastic as base
from hvd_elastic_host_removed_worker import REMOVE_AT


def main():
    hvd_harness.require_torch()
    transport = sys.argv[1] if len(sys.argv) > 1 else "shm"
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="zc_host_removed_") as d:
        trigger, script = os.path.join(d, "gone"), os.path.join(d, "discover.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho localhost:3\n[ -e '%s' ] || echo gone:1\n" % trigger)
        os.chmod(script, 0o755)
        cmd = [os.environ["ZCRUN"], "--timeout", "150", "-np", str(base.WORLD), "-H",
               "localhost:3,gone:1", "--rsh", "env ZC_FAKE_HOST={host}", "--min-np",
               str(base.WORLD - 1), "--max-np", str(base.WORLD), "--host-discovery-script", script,
               sys.executable, os.path.join(hvd_harness.HERE, "hvd_elastic_host_removed_worker.py")]
        env = hvd_harness._env({"ZC_TRANSPORT": transport, "ZC_TIMEOUT": "60",
                                "HOST_GONE_TRIGGER": trigger})
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    out = p.stdout + p.stderr
    results = [json.loads(m) for m in re.findall(r"RESULT (\{.*\})", out)]
    fail = []
    if p.returncode != 0:
        fail.append("zcrun exited %d" % p.returncode)
    if "host gone left the host discovery script's output: stopping rank 3" not in out:
        fail.append("zcrun did not say that it stops rank 3 for its host")
    if sorted(r["rank"] for r in results) != list(range(base.WORLD - 1)):
        fail.append("ranks that finished: %s" % sorted(r["rank"] for r in results))
    want = [(0, 0, base.WORLD), REMOVE_AT + (base.WORLD - 1,)]
    for r in results:
        if r["size"] != base.WORLD - 1:
            fail.append("rank %d ends on %d ranks" % (r["rank"], r["size"]))
        if [tuple(x) for x in r["schedule"]] != want:
            fail.append("rank %d's schedule %s, want %s" % (r["rank"], r["schedule"], want))
        if not r["errors"]:
            fail.append("rank %d saw no HorovodInternalError" % r["rank"])
    if not fail:
        base.check_reference_params(results, want, fail)
    if fail:
        print(out[-20000:])
        raise SystemExit("FAIL (%s): %s" % (transport, "\n".join(fail)))
    print("elastic DistributedOptimizer, host removed by the discovery script (%s): schedule %s, "
          "parameters bitwise equal to the reference on 3 ranks (%.1f s)"
          % (transport, want, time.monotonic() - t0))


if __name__ == "__main__":
    main()
