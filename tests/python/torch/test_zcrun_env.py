"""zcrun exports what torch scripts expect (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR on loopback, a free MASTER_PORT): `zcrun -np N
python3 script.py` with init_method="env://" runs on zcomm, for 1 to 4 ranks,
twice in a row (a fresh port each time)."""
import os
import re
import subprocess
import sys

import zc_torch_harness as h


def main():
    h.require_torch()
    h.loopback_env()
    zcrun = os.environ["ZCRUN"]
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zcrun_env_worker.py")
    for n in (1, 2, 4, 2):
        p = subprocess.run([zcrun, "-np", str(n), sys.executable, worker], capture_output=True,
                           text=True, timeout=120)
        out = p.stdout + p.stderr
        assert p.returncode == 0, f"zcrun -np {n}: exit {p.returncode}\n{out}"
        ranks = sorted(int(m) for m in re.findall(rf"OK rank (\d+) of {n} master", out))
        assert ranks == list(range(n)), f"zcrun -np {n}: ranks that finished: {ranks}\n{out}"
        master = re.search(r"master (\S+)", out).group(1)
        print(f"zcrun -np {n}: every rank ran env:// on zcomm (master {master})", flush=True)
    print("OK")


if __name__ == "__main__":
    main()
