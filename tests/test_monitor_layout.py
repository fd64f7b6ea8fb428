"""The monitor's helpers do not reach into private fields: its state is one object.

guard/monitor/ keeps the monitor's shared, mutable state in one dataclass
(:class:`guard.monitor.shared.MonitorState`, owned by the monitor as ``m.state``),
and the functions in the other modules of the package use the monitor's public
fields and methods. A read of ``X._name`` where ``X`` is not ``self`` or ``cls``
reaches into another object's private part: at most :data:`MAX_PRIVATE_READS` of
them are allowed in the whole package (those left override or drive watchdog's
own internals), so that the split by line count cannot come back.
"""

from __future__ import annotations

import ast
from pathlib import Path

MONITOR = Path(__file__).resolve().parents[1] / "guard" / "monitor"
#: private attribute reads from outside the owning object, in all of guard/monitor/
MAX_PRIVATE_READS = 10


def private_reads(source: str) -> list[tuple[int, str]]:
    """``(line, "X._name")`` for each read of a private attribute of anything but
    ``self``/``cls`` (dunders are Python's and do not count)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append((node.lineno, f"{ast.unparse(node.value)}.{name}"))
    return sorted(found)


def test_the_counter_sees_private_reads_and_only_those() -> None:
    src = (
        "def f(m, self):\n"
        "    m._known.get(1)\n"          # a read of another object's private field
        "    m.state.known\n"            # public: not counted
        "    self._lock\n"               # the object's own: not counted
        "    m.__class__\n"              # Python's own name: not counted
        "    m._stop = 1\n"              # a store, not a read
        "    super()._get_or_create_watch(1)\n"
    )
    assert private_reads(src) == [(2, "m._known"), (7, "super()._get_or_create_watch")]


def test_monitor_helpers_read_few_private_fields() -> None:
    modules = sorted(MONITOR.glob("*.py"))
    assert any(p.name == "watcher.py" for p in modules), "guard/monitor/ has no watcher.py"
    reads = [
        f"{p.name}:{line}: {what}"
        for p in modules
        for line, what in private_reads(p.read_text(encoding="utf-8"))
    ]
    assert len(reads) <= MAX_PRIVATE_READS, (
        f"{len(reads)} reads of private attributes from outside their object in"
        f" guard/monitor/ (at most {MAX_PRIVATE_READS}): put shared state in"
        " MonitorState (guard/monitor/shared.py) and call public methods:\n  "
        + "\n  ".join(reads)
    )
