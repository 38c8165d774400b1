"""Failures of zcomm.torch's Horovod API: a mismatch (same name, another
shape, dtype or root) raises on every rank naming the tensor and both sides,
and the engine goes on; local mistakes raise ValueError on that rank only;
a peer's shutdown() stops this rank's engine, which init() starts anew, and
is_initialized() changes only by this rank's own calls; a
rank killed in training ends every other rank's engine with an error (no
hang)."""
import re

import hvd_harness as h


def main():
    h.require_torch()
    for n in (2, 3):
        rc, out = h.zcrun(n, "hvd_fail_worker.py", ["mismatch"], timeout=120)
        h.expect_ok("zcrun -np %d mismatch" % n, n, rc, out)
        assert len(h.ok_ranks(out, n, "MISMATCH")) == n, out
        for mode in ("mistakes", "join_others", "peer_shutdown", "reinit_race"):
            rc, out = h.zcrun(n, "hvd_fail_worker.py", [mode], timeout=120)
            h.expect_ok("zcrun -np %d %s" % (n, mode), n, rc, out)
    n = 3
    rc, out = h.zcrun(n, "hvd_fail_worker.py", ["killed"], timeout=120,
                      env={"ZC_TIMEOUT": "30"})
    errs = h.ok_ranks(out, n, "ERROR")
    if errs != list(range(n - 1)):
        print(out)
        raise SystemExit("FAIL: killed rank: the survivors that saw an error: %s (exit %d)"
                         % (errs, rc))
    for line in out.splitlines():
        if "ERROR rank" in line:
            print(line)
            m = re.search(r"after ([\d.]+) s", line)
            assert m and float(m.group(1)) < 10.0, line
    print("killed rank: every survivor's engine ended with an error")
    print("OK")


if __name__ == "__main__":
    main()
