"""``guard --version``, ``guard check`` and ``guard lint`` without typer or rich.

A pre-commit hook or an editor calls ``guard check`` or ``guard lint`` once per
file, so their start-up is paid again and again; typer, rich and the other
commands' modules cost several times what the answer does. As for ``guard run``
(:mod:`guard.cli.run_plain`), :func:`guard.cli._main.main` reads a plain command
line here (:func:`parse_check`, :func:`parse_lint`) and answers it itself; anything
else (``--help``, ``--dialect``, ``--list-rules``, an unknown or bundled option, a
missing value) goes to the typer command, which says it in the conventional words
and then calls the same :func:`run_check` / :func:`run_lint`. Policies load from
the validated cache (:func:`guard.policy.valid.storing`), so a policy seen before
needs no pydantic either. ``benchmarks/cli.py`` measures the result.
"""

# Lazy imports: policy, decision and lint code per function: guard check/lint start fast.

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.ansi import paint
from guard.cli._base import color_enabled, enter, print_json, read_options, warn
from guard.cli._io import control_chars, printable, read_json_input
from guard.effects import Effect, EffectKind, GuardError, ToolCall

if TYPE_CHECKING:
    from guard.decide import Guard
    from guard.effects import EffectKind, ToolCall
    from guard.gate import Confiner

#: Exit status per verdict; allow_confined (``--host`` naming a host that rewrites calls) is 4.
EXIT_CODES = {"allow": 0, "deny": 1, "ask": 3, "allow_confined": 4}
KINDS = ("read", "write", "delete", "exec", "network")


# -- shared by check and explain ---------------------------------------------------------


def effect_kind(kind: str) -> EffectKind:
    if kind not in KINDS:
        raise GuardError(f"unknown effect kind {kind!r}; use one of: {', '.join(KINDS)}")
    return EffectKind(kind)


def path_arg(path: str) -> str:
    """PATH as given, refused (exit 2) when it holds a control character."""
    bad = control_chars(path)
    if bad is not None:
        raise GuardError(
            f"PATH '{printable(path)}' contains {bad}; guard refuses such names (a hook"
            " denies them), so there is nothing to check"
        )
    return path


def load_guard(policy: str | None, worktree: Path | None, cwd: Path | None) -> Guard:
    """The policy for a command, from the validated cache when seen before; its warnings
    printed."""
    from guard.decide import Guard
    from guard.policy import valid

    if cwd is not None and not cwd.is_dir():
        raise GuardError(f"--cwd {cwd}: not a directory")
    if worktree is not None and not worktree.is_dir():
        raise GuardError(f"--worktree {worktree}: not a directory")
    with valid.storing():  # the next command on this policy starts without pydantic
        g = Guard.load(policy, worktree=worktree, cwd=cwd)
    for message in g.loaded.warnings:
        warn(message)
    if worktree is None and g.roots.worktree is None:
        from guard.paths import no_worktree_note

        note = no_worktree_note(cwd)
        if note is not None:
            warn(note)
    return g


def badge(action: str, on: bool) -> str:
    color = {"allow": "green", "ask": "yellow", "deny": "red"}.get(action, "cyan")
    return paint(f"{action.upper():5}", f"bold {color}", on)


# -- guard check -------------------------------------------------------------------------


@dataclass
class CheckOptions:
    """``guard check``'s options, as the typer command and :func:`parse_check` give them."""

    kind: str | None = None
    path: str | None = None
    agent: str = "plan"
    policy: str | None = None
    worktree: Path | None = None
    cwd: Path | None = None
    dialect: str | None = None
    tool: str | None = None
    tool_input: str | None = None
    as_json: bool = False
    audit_log: Path | None = None
    #: decide as this host's hook does (None: as a host that can only allow or refuse)
    host: str | None = None


_CHECK_VALUED = {
    "--agent": "agent", "-a": "agent",
    "--policy": "policy", "-p": "policy",
    "--worktree": "worktree", "-w": "worktree",
    "--cwd": "cwd", "-C": "cwd",
    "--audit-log": "audit_log",
}  # fmt: skip
_CHECK_PATHS = ("worktree", "cwd", "audit_log")


def parse_check(args: list[str]) -> CheckOptions | None:
    """``guard check ARGS`` as options when it is a plain ``KIND PATH`` check, else None."""
    read = read_options(args, _CHECK_VALUED, {"--json": "as_json"})
    if read is None:
        return None
    values, positionals = read
    if len(positionals) != 2:
        return None
    for key in _CHECK_PATHS:
        if key in values:
            values[key] = Path(values[key])
    return CheckOptions(kind=positionals[0], path=positionals[1], **values)


def _tool_call(o: CheckOptions) -> ToolCall:
    if o.tool is None:
        raise GuardError("--dialect needs --tool NAME (and usually --input JSON)")
    args: Any = read_json_input(o.tool_input) if o.tool_input is not None else {}
    if not isinstance(args, dict):
        raise GuardError(
            f"--input must be a JSON object, got {type(args).__name__};"
            ' e.g. \'{"file_path": "src/a.py"}\''
        )
    where = str(o.cwd.absolute()) if o.cwd is not None else os.getcwd()
    assert o.dialect is not None
    return ToolCall(o.dialect, o.tool, args, where)


def _confiner(host: str | None) -> Confiner:
    """How check decides a plan-mode shell call: as ``host``'s hook does; without a host,
    as a hook that can only allow or refuse (guard's grammar, else the confined form)."""
    from guard.hooks import adapter_for
    from guard.sandbox.confiner import ShellConfiner
    from guard.sandbox.direct import GrammarConfiner

    if host is not None and adapter_for(host).can_rewrite:
        return ShellConfiner(build=False)
    return GrammarConfiner()


def run_check(o: CheckOptions) -> int:
    """Decide one effect (or a whole tool call) as the gate does; print it; the exit code."""
    from guard.gate import Gate

    g = load_guard(o.policy, o.worktree, o.cwd)
    g.agent(o.agent)  # unknown agent: a clear error, exit 2
    sink = None
    if o.audit_log is not None:
        from guard.audit.sinks import AuditLog

        sink = AuditLog(o.audit_log)
    gate = Gate(guard=g, agent=o.agent, sink=sink, source="check", confiner=_confiner(o.host))
    if o.dialect is not None:
        if o.kind is not None or o.path is not None:
            raise GuardError("give either KIND PATH or --dialect/--tool/--input, not both")
        verdict = gate.record(gate.decide(_tool_call(o)))
    else:
        if o.kind is None or o.path is None:
            raise GuardError("give KIND PATH (e.g. `write src/a.py`) or --dialect/--tool/--input")
        effect = Effect(effect_kind(o.kind), path_arg(o.path))
        where = str(o.cwd) if o.cwd is not None else None
        call = ToolCall("effect", o.kind, {"target": o.path}, where)
        verdict = gate.record(gate.decide(call, effects=[effect]))
    if verdict.failed:
        raise GuardError(verdict.reason)  # bad input: exit 2 (the verdict is a deny)
    each = [(e, g.decide_effect(o.agent, e, o.cwd)) for e in verdict.effects]
    if o.as_json:
        # one shape for both forms: the verdict and every effect with its own decision
        out: dict[str, Any] = verdict.to_json()
        out["agent"] = o.agent
        out["effects"] = [
            {"kind": e.kind.value, "target": e.target, "detail": e.detail or None, **d.to_json()}
            for e, d in each
        ]
        print_json(out)
    else:
        on = color_enabled(sys.stdout)
        lines = []
        if o.dialect is not None:
            for e, d in each:
                extra = "  " + paint(f"({printable(e.detail)})", "dim", on) if e.detail else ""
                lines.append(f"  {badge(d.action, on)} {printable(str(e))}{extra}")
        lines.append(f"{badge(verdict.action, on)} {printable(verdict.reason)}")
        lines.append(paint(f"rule: {printable(verdict.rule)}", "dim", on))
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    return EXIT_CODES[verdict.action]


# -- guard lint --------------------------------------------------------------------------

LINT_FORMATS = ("pretty", "json", "sarif", "github")
FAIL_LEVELS = ("error", "warning", "note")


@dataclass
class LintOptions:
    """``guard lint``'s options (without --list-rules and --explain, which lint nothing)."""

    files: list[str] = field(default_factory=list)
    output_format: str = "pretty"
    fail_level: str = "error"
    config: Path | None = None
    #: -C DIR: lint as if started in DIR (the policy discovered there)
    cwd: Path | None = None


def parse_lint(args: list[str]) -> LintOptions | None:
    """``guard lint ARGS`` as options when it is a plain command line, else None."""
    valued = {"--format": "output_format", "-f": "output_format",
              "--fail-level": "fail_level", "--config": "config",
              "--cwd": "cwd", "-C": "cwd"}  # fmt: skip
    read = read_options(args, valued, {})
    if read is None:
        return None
    values, files = read
    if values.get("output_format", "pretty") not in LINT_FORMATS:
        return None
    if values.get("fail_level", "error") not in FAIL_LEVELS:
        return None
    for key in ("config", "cwd"):
        if key in values:
            values[key] = Path(values[key])
    return LintOptions(files=files, **values)


def default_lint_target() -> str:
    """The policy guard would use here: $GUARD_POLICY, .openoxide/policy.toml, builtin."""
    from guard.gate import policy_named
    from guard.paths import find_worktree
    from guard.policy import BUILTIN_PREFIX

    env = policy_named(None, os.environ)
    if env:
        return env
    wt = find_worktree(os.getcwd())
    if wt is not None and (wt / ".openoxide/policy.toml").is_file():
        return str(wt / ".openoxide/policy.toml")
    return BUILTIN_PREFIX + "default"


def run_lint(o: LintOptions) -> int:
    """Lint the files; print the report in its format; 3 with findings at --fail-level."""
    from guard.lint import Level, lint_paths, load_pyproject_config
    from guard.lint.config import find_pyproject
    from guard.lint.formats import FORMATS, PrettyFormatter
    from guard.policy import valid

    enter(o.cwd)
    if o.config is not None and not o.config.is_file():
        raise GuardError(f"--config {o.config}: no such file")
    cfg = load_pyproject_config(o.config if o.config is not None else find_pyproject(Path.cwd()))
    targets = list(o.files) if o.files else [default_lint_target()]
    tty = sys.stderr.isatty()

    def progress(target: str) -> None:
        if tty:
            sys.stderr.write(f"\rguard lint: {target[-60:]:<60}")
            sys.stderr.flush()

    with valid.storing():  # a file linted before lints again without pydantic
        report = lint_paths(targets, cfg, progress=progress)
    if tty:
        sys.stderr.write("\r" + " " * 72 + "\r")
    if o.output_format == "pretty":
        text = PrettyFormatter(color=color_enabled(sys.stdout)).format(report)
    else:
        text = FORMATS[o.output_format]().format(report)
    sys.stdout.write(text)
    sys.stdout.flush()
    return 3 if report.fails(Level(o.fail_level)) else 0
