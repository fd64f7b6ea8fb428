#!/usr/bin/env python3
"""Other processes at work on the same file system: create directory trees and `rm -rf` them.

usage: fs-churn.py [DIR] [--seconds N]   (DIR defaults to a new directory under /tmp)

Every round makes a small tree (3 levels, a few files each) and removes it with
``rm -rf``: a fanotify filesystem mark then sees events in directories that are gone
when they are read. Used to check that the monitor's tests and its restore hold on a
busy machine (see tests/monitor/test_monitor_fanscale.py). Stops on SIGINT/SIGTERM
or after --seconds, removing what it made.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", help="where to churn (default: a new dir under /tmp)")
    ap.add_argument("--seconds", type=float, default=0, help="stop after N seconds (0: never)")
    args = ap.parse_args(argv)
    top = args.dir or tempfile.mkdtemp(prefix="guard-churn-", dir="/tmp")
    os.makedirs(top, exist_ok=True)
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    end = time.monotonic() + args.seconds if args.seconds > 0 else None
    rounds = 0
    try:
        while not stop and (end is None or time.monotonic() < end):
            tree = os.path.join(top, f"t{rounds % 4}")
            for a in range(3):
                for b in range(3):
                    d = os.path.join(tree, f"a{a}", f"b{b}")
                    os.makedirs(d, exist_ok=True)
                    for f in range(3):
                        with open(os.path.join(d, f"f{f}"), "w") as fh:
                            fh.write("x")
            subprocess.run(["rm", "-rf", tree], check=False)
            rounds += 1
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print(f"fs-churn: {rounds} trees made and removed under {top}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
