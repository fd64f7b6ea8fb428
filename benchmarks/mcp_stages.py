"""`guard mcp` with a CPU-time counter on each stage of a call (for `mcp.py --stages`).

    python benchmarks/mcp_stages.py OUT.json mcp [guard mcp options] -- SERVER ...

Runs `guard mcp` in this process with each stage wrapped: the thread CPU time spent
in it (``time.thread_time_ns``, which no other process's work lands in) and the
number of times it ran are summed from the last SIGUSR1 on (``mcp.py`` sends it after
the warm-up), and written to ``OUT.json`` when the proxy exits.
Stages nest (the client's line includes deciding, which includes the policy check);
``mcp.py`` prints them per call. The strict reading of each line is counted on its own
line too (it is part of the client's and of the server's line). The wrapping itself
costs about a microsecond per stage entered, so these runs are never the timed ones.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# this directory holds mcp.py: keep it from shadowing the `mcp` SDK package
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

#: (label, depth, module, object, attribute): what is timed, in the order printed; a stage
#: is part of the last one above it of smaller depth.
STAGES = [
    ("the client's line, all", 0, "guard.mcp.proxy", "McpProxy", "_from_client_lines"),
    ("decide", 1, "guard.mcp.call_checks", "CallChecks", "_decide_call"),
    ("policy files unchanged?", 2, "guard.policy.freshness", "PolicyWatch", "current"),
    ("gate decision", 2, "guard.gate", "Gate", "decide"),
    ("the call's effects", 3, "guard.mcp.gate_side", "McpGate", "effects"),
    ("paths canonicalized", 3, "guard.decide", "", "canonicalize"),
    ("forward (render, write)", 1, "guard.mcp.forwarding", "Forwarding", "_forward"),
    ("verdict record made", 1, "guard.mcp.call_checks", "CallChecks", "_record_forwarded"),
    ("records written", 1, "guard.mcp.gate_side", "McpSink", "end_batch"),
    ("audit log append", 2, "guard.audit.logfile", "", "append_records"),
    ("event log line made", 2, "guard.mcp.gate_side", "", "session_event"),
    ("the server's line, all", 0, "guard.mcp.forwarding", "Forwarding", "_from_server"),
    ("to the client (render, write)", 1, "guard.mcp.jsonrpc", "Pipe", "_write_client"),
    ("strict read, both lines", 0, "guard.mcp.wire", "", "read"),
]


def _wrap(spent: dict[str, list[int]], label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    cell = spent.setdefault(label, [0, 0])

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.thread_time_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            cell[0] += time.thread_time_ns() - began
            cell[1] += 1

    return timed


def main() -> None:
    import importlib

    out = sys.argv[1]
    spent: dict[str, list[int]] = {}
    for label, _depth, module_name, owner, attr in STAGES:
        module = importlib.import_module(module_name)
        target = getattr(module, owner) if owner else module
        setattr(target, attr, _wrap(spent, label, getattr(target, attr)))
    def restart(_signum: int, _frame: object) -> None:  # SIGUSR1: the warm-up is over
        for cell in spent.values():
            cell[0] = cell[1] = 0

    signal.signal(signal.SIGUSR1, restart)
    exit_now = os._exit

    def leave(code: int) -> None:
        with open(out, "w") as fh:
            json.dump([[label, depth, *spent[label]] for label, depth, *_ in STAGES], fh)
        exit_now(code)

    os._exit = leave  # type: ignore[assignment]
    sys.argv = ["guard", *sys.argv[2:]]
    from guard.cli import main as guard_main

    guard_main()


if __name__ == "__main__":
    main()
