"""python3 -m zcomm.trace DIR [--chrome OUT.json] [--all]: the diagnosis of
a job from the flight-recorder dumps in DIR (docs/debugging.md). Exit
status: 0, 2 (DIR unreadable), 3 (no dump in DIR)."""

import argparse
import json
import sys

from .analyze import diagnose
from .chrome import to_chrome
from .dump import load_dir


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m zcomm.trace",
                                description="Diagnose a hung or failed zcomm job from its "
                                            "flight-recorder dumps (zctrace-*.json).")
    p.add_argument("dir", help="folder with the dumps (ZC_TRACE_DIR of the job)")
    p.add_argument("--chrome", metavar="OUT.json", help="also write every rank's operations as a Chrome trace")
    p.add_argument("--all", action="store_true", help="show every communicator, not only those with findings")
    p.add_argument("--verdict", action="store_true", help="print only the verdict line")
    args = p.parse_args(argv)
    try:
        dumps, launcher, problems = load_dir(args.dir)
    except OSError as e:
        print("zcomm.trace: %s" % e, file=sys.stderr)
        return 2
    diag = diagnose(dumps, launcher, problems)
    if args.verdict:
        print(diag.verdict())
    else:
        print("\n".join(diag.lines(args.all)))
    if args.chrome:
        with open(args.chrome, "w", encoding="utf-8") as f:
            json.dump(to_chrome(dumps), f)
        print("chrome trace of %d dump%s: %s" % (len(dumps), "" if len(dumps) == 1 else "s", args.chrome))
        coarse = max((d.resolution_ns for d in dumps), default=1)
        if coarse > 1000:
            print("times are to %g ms (the coarse clock): ZC_TRACE_CLOCK=precise times every call" % (coarse / 1e6))
    return 0 if dumps else 3


if __name__ == "__main__":
    sys.exit(main())
