"""zcomm.torch's Horovod API on 1 to 4 ranks under zcrun, against torch
references (hvd_api_worker.py); the same results bit for bit with fusion
off (ZC_FUSION_THRESHOLD=0); 3 ranks over tcp; and once under mpirun."""
import re

import hvd_harness as h


def digests(out):
    return dict(re.findall(r"DIGEST rank (\d+) (\w+)", out))


def main():
    h.require_torch()
    for n in (1, 2, 3, 4):
        rc, out = h.zcrun(n, "hvd_api_worker.py")
        h.expect_ok("zcrun -np %d api" % n, n, rc, out)
        print("\n".join(l for l in out.splitlines() if "STATS" in l))
        if n in (2, 3):
            rc0, out0 = h.zcrun(n, "hvd_api_worker.py", env={"ZC_FUSION_THRESHOLD": "0"})
            h.expect_ok("zcrun -np %d api, fusion off" % n, n, rc0, out0)
            assert digests(out) == digests(out0) and len(digests(out)) == n, \
                "fusion on and off differ:\n%s\n%s" % (digests(out), digests(out0))
            print("zcrun -np %d: fusion on and off give identical results" % n, flush=True)
    rc, out = h.zcrun(3, "hvd_api_worker.py", env={"ZC_TRANSPORT": "tcp"})
    h.expect_ok("zcrun -np 3 api over tcp", 3, rc, out)
    print("OK")


if __name__ == "__main__":
    main()
