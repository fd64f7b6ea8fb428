"""What ``guard doctor`` prints, without typer: :func:`run_doctor`.

For ``guard doctor`` and ``guard doctor --json`` :func:`guard.cli._main.main` answers
here without loading typer; the typer command (guard/cli/hooks.py) says ``--help`` and
usage errors and calls the same :func:`run_doctor`, so both print the same bytes. The
checks themselves are :mod:`guard.setup.doctor`'s.
"""

# Lazy imports: the doctor's checks and rich's tables only when the doctor runs.

from __future__ import annotations

from typing import Any

from guard.cli._base import print_json


def doctor_tables(hosts: list[Any], layers: list[Any]) -> list[Any]:
    """The doctor's two rich tables; names and details are plain text, never markup (a
    detail such as "the [re2] extra" keeps its brackets)."""
    from rich.table import Table
    from rich.text import Text

    style = {"ok": "green", "off": "dim", "broken": "bold red", "skipped": "bold red"}
    tables = []
    for title, checks in (("Hosts", hosts), ("Layers", layers)):
        if not checks:
            continue
        table = Table(title=title, show_lines=False)
        table.add_column("what")
        table.add_column("status")
        table.add_column("detail", overflow="fold")
        for c in checks:
            table.add_row(Text(c.name), Text(c.status, style=style[c.status]), Text(c.detail))
        tables.append(table)
    return tables


def doctor_verdict(hosts: list[Any], layers: list[Any]) -> str:
    """The doctor's first line: whether anything will block or skip, and what is wired."""
    bad = [c for c in [*hosts, *layers] if c.status in ("broken", "skipped")]
    wired = [c.name for c in hosts if c.status == "ok"]
    hooks = f"guard's hook runs for {', '.join(wired)}" if wired else "no host is wired here"
    if bad:
        names = ", ".join(f"{c.name} {c.status}" for c in bad)
        return f"{len(bad)} problem{'s' if len(bad) != 1 else ''}: {names}; {hooks}"
    return f"ok: {hooks}"


def parse_doctor(args: list[str]) -> bool | None:
    """``guard doctor [--json]`` as whether JSON is asked; None for anything else."""
    if args in ([], ["--json"]):
        return bool(args)
    return None


def run_doctor(as_json: bool) -> int:
    """Check the hosts and layers, print them; 1 when anything will block or skip."""
    from guard.cli._console import console
    from guard.setup.doctor import host_checks, layer_checks

    hosts = host_checks()
    layers = layer_checks()
    verdict = doctor_verdict(hosts, layers)
    if as_json:
        print_json(
            {"verdict": verdict, "hosts": [c.to_json() for c in hosts],
             "layers": [c.to_json() for c in layers]},
            indent=2,
        )
    else:
        out = console()
        out.print(f"guard doctor: {verdict}", markup=False, soft_wrap=True)
        shown = [c for c in hosts if c.status != "off"]
        for table in doctor_tables(shown, layers):
            out.print(table)
        off = sorted({c.name for c in hosts if c.status == "off"})
        if off:
            out.print(f"not wired here (off): {', '.join(off)}; `guard doctor --json` lists"
                      " every scope", markup=False, soft_wrap=True)
        for c in layers:
            if c.name == "audit log" and c.extra.get("path"):
                out.print(f"audit log: {c.extra['path']}", markup=False, soft_wrap=True)
    return 1 if any(c.status in ("broken", "skipped") for c in [*hosts, *layers]) else 0
