"""Test-only entry point: run one of guard's entry modules with the walls' test switches on.

    python tests/switched.py [--no-namespaces] [--no-walls] [--no-mcp-landlock] MODULE [ARG...]

runs ``MODULE`` (``guard`` for the CLI, ``guard.hooks`` for the hook, ...) as ``python
-m MODULE ARG...`` would, after :func:`guard.sandbox.confine.set_test_switches`. The
switches live in the process only: guard reads none of them from the environment, so a
hook, hookd or ``guard run`` started by anyone else keeps every wall.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve()


def main() -> None:
    from guard.sandbox import confine

    args = sys.argv[1:]
    switches = []
    while args and args[0].startswith("--"):
        switches.append(args.pop(0)[2:])
    if not args:
        raise SystemExit(__doc__)
    confine.set_test_switches(*switches)
    module, sys.argv = args[0], [args[0], *args[1:]]
    if sys.path and Path(sys.path[0]).resolve() == HERE.parent:
        del sys.path[0]  # tests/ is not guard's import path
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
