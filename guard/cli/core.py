"""`guard check`, `guard explain`, `guard schema`, `guard plan-dir`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from guard.cli._app import app, console, print_json, warn
from guard.cli._io import control_chars, printable, read_json_input
from guard.cli.options import AgentOpt, CwdOpt, JsonOpt, PolicyOpt, WorktreeOpt
from guard.decide import Guard
from guard.effects import Effect, EffectKind, GuardError, ToolCall
from guard.network import path_target
from guard.paths import plan_dir
from guard.policy import json_schema

#: Exit status per verdict; allow_confined (only with a confiner, which check has not) is 4.
EXIT_CODES = {"allow": 0, "deny": 1, "ask": 3, "allow_confined": 4}
KINDS = ("read", "write", "delete", "exec", "network")



def _out() -> Console:
    return console()


def _kind(kind: str) -> EffectKind:
    if kind not in KINDS:
        raise GuardError(f"unknown effect kind {kind!r}; use one of: {', '.join(KINDS)}")
    return EffectKind(kind)


def _path_arg(path: str) -> str:
    """PATH as given, refused (exit 2) when it holds a control character."""
    bad = control_chars(path)
    if bad is not None:
        raise GuardError(
            f"PATH '{printable(path)}' contains {bad}; guard refuses such names (a hook"
            " denies them), so there is nothing to check"
        )
    return path


def _load(policy: str | None, worktree: Path | None, cwd: Path | None) -> Guard:
    if cwd is not None and not cwd.is_dir():
        raise GuardError(f"--cwd {cwd}: not a directory")
    if worktree is not None and not worktree.is_dir():
        raise GuardError(f"--worktree {worktree}: not a directory")
    g = Guard.load(policy, worktree=worktree, cwd=cwd)
    for message in g.loaded.warnings:
        warn(message)
    return g


def _tool_call(
    dialect: str, tool: str | None, tool_input: str | None, cwd: Path | None
) -> ToolCall:
    if tool is None:
        raise GuardError("--dialect needs --tool NAME (and usually --input JSON)")
    args: Any = read_json_input(tool_input) if tool_input is not None else {}
    if not isinstance(args, dict):
        raise GuardError(
            f"--input must be a JSON object, got {type(args).__name__};"
            ' e.g. \'{"file_path": "src/a.py"}\''
        )
    where = str(cwd.absolute()) if cwd is not None else os.getcwd()
    return ToolCall(dialect, tool, args, where)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  guard check --agent plan write src/main.py            # exit 1: denied\n\n"
        "  guard check --agent plan write .openoxide/plans/p.md  # exit 0: allowed\n\n"
        "  guard check --agent plan --json read .env             # exit 3: ask\n\n"
        "  guard check --agent plan --dialect claude-code --tool Bash"
        ' --input \'{"command": "echo hi > src/x"}\'  # exit 1\n\n'
        "Exit codes: 0 allow, 1 deny, 3 ask, 2 bad input or usage. With --audit-log the"
        " verdict is also appended to that file, as the hook records it."
    )
)
def check(
    agent: AgentOpt = "plan",
    kind: Annotated[
        str | None, typer.Argument(help="Effect kind: read, write, delete, exec or network.")
    ] = None,
    path: Annotated[
        str | None,
        typer.Argument(help="Path the effect touches (for network: HOST or HOST:PORT)."),
    ] = None,
    policy: PolicyOpt = None,
    worktree: WorktreeOpt = None,
    cwd: CwdOpt = None,
    dialect: Annotated[
        str | None,
        typer.Option(help="Check a whole tool call: claude-code, codex, opencode, gemini or mcp."),
    ] = None,
    tool: Annotated[str | None, typer.Option(help="Tool name in that dialect, e.g. Bash.")] = None,
    tool_input: Annotated[
        str | None,
        typer.Option(
            "--input",
            "-i",
            help="The tool's input: a JSON object, @FILE holding one, or - for standard input.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    audit_log: Annotated[
        Path | None,
        typer.Option(help="Also append the verdict to this audit log (JSONL), as the hook does."),
    ] = None,
) -> None:
    """Decide whether AGENT may do KIND to PATH (or make a whole tool call).

    Prints the decision and the reason; the exit code carries the decision.
    The decision is the gate's, as for a hook or the MCP proxy.
    """
    from guard.audit import AuditLog
    from guard.gate import Gate

    g = _load(policy, worktree, cwd)
    g.agent(agent)  # unknown agent: a clear error, exit 2
    gate = Gate(
        guard=g,
        agent=agent,
        sink=AuditLog(audit_log) if audit_log is not None else None,
        source="check",
    )
    if dialect is not None:
        if kind is not None or path is not None:
            raise GuardError("give either KIND PATH or --dialect/--tool/--input, not both")
        verdict = gate.decide(_tool_call(dialect, tool, tool_input, cwd))
    else:
        if kind is None or path is None:
            raise GuardError("give KIND PATH (e.g. `write src/a.py`) or --dialect/--tool/--input")
        effect = Effect(_kind(kind), _path_arg(path))
        where = str(cwd) if cwd is not None else None
        verdict = gate.decide(ToolCall("effect", kind, {"target": path}, where), effects=[effect])
    if verdict.failed:
        raise GuardError(verdict.reason)  # bad input: exit 2 (the verdict is a deny)
    each = [(e, g.decide_effect(agent, e, cwd)) for e in verdict.effects]
    if as_json:
        # one shape for both forms: the verdict and every effect with its own decision
        out: dict[str, Any] = verdict.to_json()
        out["agent"] = agent
        out["effects"] = [
            {"kind": e.kind.value, "target": e.target, "detail": e.detail or None, **d.to_json()}
            for e, d in each
        ]
        print_json(out)
    else:
        con = _out()
        if dialect is not None:
            for e, d in each:
                extra = f"  [dim]({escape(printable(e.detail))})[/]" if e.detail else ""
                con.print(f"  {_badge(d.action)} {escape(printable(str(e)))}{extra}")
        con.print(f"{_badge(verdict.action)} {escape(printable(verdict.reason))}")
        con.print(f"[dim]rule: {escape(printable(verdict.rule))}[/]")
    raise typer.Exit(EXIT_CODES[verdict.action])


def _badge(action: str) -> str:
    color = {"allow": "green", "ask": "yellow", "deny": "red"}.get(action, "cyan")
    return f"[bold {color}]{action.upper():5}[/]"


@app.command(
    epilog=(
        "Example:\n\n"
        "  guard explain --agent plan write .openoxide/plans/p.md\n\n"
        "Each matching pattern is shown as FILE:LINE:PATTERN<TAB>PATH, like"
        " `git check-ignore -v`. Lists are consulted in order protected, deny, ask, allow;"
        " inside a list the last matching pattern wins."
    )
)
def explain(
    kind: Annotated[str, typer.Argument(help="read, write, delete, exec or network.")],
    path: Annotated[str, typer.Argument(help="Path (or HOST or HOST:PORT) to explain.")],
    agent: AgentOpt = "plan",
    policy: PolicyOpt = None,
    worktree: WorktreeOpt = None,
    cwd: CwdOpt = None,
) -> None:
    """Show every list consulted, every pattern that matched, and which one decided."""
    g = _load(policy, worktree, cwd)
    g.agent(agent)
    ex = g.explain(agent, Effect(_kind(kind), _path_arg(path)), cwd)
    con = _out()
    con.print(f"policy: {g.loaded.name} ({g.discovery})")
    if not ex.paths:
        con.print("no path checked (see the reason below)")
    for p in ex.paths:
        shown = g.roots.describe(p) if not p.startswith("//network/") else path_target(p)
        con.print(f"\n[bold]{kind} {escape(printable(shown))}[/]  [dim]{escape(printable(p))}[/]")
        for hit in ex.lists[p]:
            head = f"  {hit.list_name:9}"
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
                head = " " * 11
            if hit.decided_by is not None and hit.decided_by.negated:
                con.print(" " * 11 + "[dim](an exception: this list does not apply)[/]")
    d = ex.decision
    con.print(
        f"\n{_badge(d.action)} {escape(printable(d.reason))}\n[dim]rule: {escape(d.rule)}[/]"
    )
    raise typer.Exit(EXIT_CODES[d.action.value])


@app.command()
def schema() -> None:
    """Print the JSON Schema of policy files (for editor completion).

    Example: guard schema > .openoxide/policy.schema.json
    """
    print(json.dumps(json_schema(), indent=2))


@app.command("plan-dir")
def plan_dir_cmd(
    cwd: CwdOpt = None,
    worktree: WorktreeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print where plan files live here, and which rule chose it.

    Inside a worktree (a .git, .hg, .jj or .svn marker): <worktree>/.openoxide/plans.
    Elsewhere: the user data directory, under a key stable per directory.
    """
    if cwd is not None and not cwd.is_dir():
        raise GuardError(f"--cwd {cwd}: not a directory")
    pd = plan_dir(cwd, worktree)
    if as_json:
        print_json(pd.to_json())
    else:
        print(pd.path)
        print(f"  because {pd.reason}", file=sys.stderr)
