"""The confinement helper's entry point, run by path: ``python -E -s -S run_confined.py ...``.

Kept tiny on purpose: a script run by path is compiled on every start, the
modules it imports are not (their bytecode is cached). Everything lives in
:mod:`guard.sandbox.helper`; its siblings are imported alone, not through the
``guard`` package, to keep the start-up short. The helper ends with ``os._exit``
once its output is flushed: the interpreter's teardown would only cost time
after the command is done. The cyclic garbage collector is off from the first line, as
in the helper ``guard run`` forks: its passes over the modules being imported cost the
start-up time, and what the helper makes later is made once.
"""

import gc

gc.disable()

import os  # noqa: E402
import sys  # noqa: E402

TYPE_CHECKING = False
if TYPE_CHECKING or __package__:
    from guard.sandbox.helper import main
else:
    from helper import main

code = main()
try:
    sys.stdout.flush()
    sys.stderr.flush()
finally:
    os._exit(code)
