"""What ``guard explain`` prints, without typer: :func:`run_explain`.

``guard explain`` is how a policy author asks "why": often, from a shell. For a plain
command line (:func:`parse_explain`) :func:`guard.cli._main.main` answers it here
without loading typer; the typer command (guard/cli/core.py) says ``--help`` and usage
errors and calls the same :func:`run_explain`, so both print the same bytes.
"""

# Lazy imports: rich's markup and the network helpers only when the answer is printed.

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from guard.cli._base import read_options
from guard.cli._io import printable
from guard.cli.quick import EXIT_CODES, effect_kind, load_guard, path_arg
from guard.effects import Effect


@dataclass
class ExplainOptions:
    """``guard explain``'s options, as the typer command and :func:`parse_explain` give them."""

    kind: str
    path: str
    agent: str = "plan"
    policy: str | None = None
    worktree: Path | None = None
    cwd: Path | None = None


_VALUED = {
    "--agent": "agent", "-a": "agent",
    "--policy": "policy", "-p": "policy",
    "--worktree": "worktree", "-w": "worktree",
    "--cwd": "cwd", "-C": "cwd",
}  # fmt: skip


def parse_explain(args: list[str]) -> ExplainOptions | None:
    """``guard explain ARGS`` as options when it is a plain ``KIND PATH``, else None."""
    read = read_options(args, _VALUED, {})
    if read is None:
        return None
    values, positionals = read
    if len(positionals) != 2:
        return None
    for key in ("worktree", "cwd"):
        if key in values:
            values[key] = Path(values[key])
    return ExplainOptions(kind=positionals[0], path=positionals[1], **values)


def _badge(action: str) -> str:
    color = {"allow": "green", "ask": "yellow", "deny": "red"}.get(action, "cyan")
    return f"[bold {color}]{action.upper():5}[/]"


def run_explain(o: ExplainOptions) -> int:
    """Every list consulted, every pattern that matched, and which one decided; the exit
    code of the decision."""
    from rich.markup import escape

    from guard.cli._console import console
    from guard.network import path_target

    g = load_guard(o.policy, o.worktree, o.cwd)
    g.agent(o.agent)
    ex = g.explain(o.agent, Effect(effect_kind(o.kind), path_arg(o.path)), o.cwd)
    con = console()
    con.print(f"policy: {g.loaded.name} ({g.discovery})")
    if g.managed is not None:
        pins = ", ".join(sorted(g.managed.pins)) or "none"
        con.print(f"managed: {', '.join(g.managed.files)} (pins: {pins}; consulted before"
                  " the policy's own lists, and no other layer can weaken them)")
    if not ex.paths:
        con.print("no path checked (see the reason below)")
    for p in ex.paths:
        shown = g.roots.describe(p) if not p.startswith("//network/") else path_target(p)
        con.print(f"\n[bold]{o.kind} {escape(printable(shown))}[/]  [dim]{escape(printable(p))}[/]")
        width = max(9, *(len(h.list_name) for h in ex.lists[p]))
        for hit in ex.lists[p]:
            head = f"  {hit.list_name:{width}}"
            if not hit.matches:
                con.print(f"{head} [dim]no match[/]")
                continue
            # the decider is marked once: at the deepest level it matched
            marked = max(
                (n for n, (_, pat) in enumerate(hit.matches) if pat is hit.decided_by),
                default=-1,
            )
            for n, (level, pat) in enumerate(hit.matches):
                src = pat.source
                where = f"{src.file}:{src.line}" if src else "builtin:protected"
                mark = "  [bold]<- decides this list[/]" if n == marked else ""
                shown_pat = escape(printable(pat.text))
                con.print(f"{head} {where}:{shown_pat}\t{escape(printable(level))}{mark}")
                head = " " * (width + 2)
            if hit.decided_by is not None and hit.decided_by.negated:
                con.print(" " * (width + 2) + "[dim](an exception: this list does not apply)[/]")
    d = ex.decision
    con.print(
        f"\n{_badge(d.action)} {escape(printable(d.reason))}\n[dim]rule: {escape(d.rule)}[/]"
    )
    return EXIT_CODES[d.action.value]
