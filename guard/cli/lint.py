"""``guard lint``, ``guard review`` and ``guard import``: check the policies themselves."""

from __future__ import annotations

import io
import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from guard.audit import AuditError
from guard.audit.chain import load_key
from guard.cli import completion
from guard.cli._base import a_directory, with_schema
from guard.cli.options import CwdOpt
from guard.cli.quick import LintOptions, run_lint
from guard.effects import GuardError
from guard.fleet.pages import to_table, write_html
from guard.fleet.report import build
from guard.lint import RULES
from guard.lint.docs import rule_page
from guard.lint.review import run_review, to_markdown

commands = typer.Typer()  # added to guard's application by guard.cli._app


class OutputFormat(StrEnum):
    pretty = "pretty"
    json = "json"
    sarif = "sarif"
    github = "github"


class FailLevel(StrEnum):
    error = "error"
    warning = "warning"
    note = "note"


@commands.command(
    "lint",
    epilog=(
        "Examples:\n\n"
        "  guard lint                                # the policy guard would use here\n\n"
        "  guard lint policies/ .openoxide/policy.toml\n\n"
        "  guard lint --format sarif > guard.sarif   # for code scanning\n\n"
        "  guard lint --format github                # annotations in GitHub Actions\n\n"
        "  guard lint --fail-level warning           # fail on warnings too\n\n"
        "  guard lint --list-rules ; guard lint --explain GL201\n\n"
        "Configure in pyproject.toml (\\[tool.guard.lint]) or the policy (\\[lint]):\n\n"
        '  ignore = ["GL105"]  and  \\[tool.guard.lint.levels] GL104 = "error"\n\n'
        "Exit status: 0 clean, 3 findings at or above --fail-level, 2 unreadable input."
    ),
)
def lint_command(
    files: list[str] = typer.Argument(
        None,
        help="Policy files, directories of them, or builtin:NAME. Default: the policy guard"
        " discovers here ($GUARD_POLICY, .openoxide/policy.toml, builtin:default).",
        show_default=False,
    ),
    output_format: OutputFormat = typer.Option(
        OutputFormat.pretty, "--format", "-f", help="Output format."
    ),
    fail_level: FailLevel = typer.Option(
        FailLevel.error, "--fail-level", help="Lowest level that makes the exit status 3."
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        help="pyproject.toml holding \\[tool.guard.lint]. Default: the nearest one upwards.",
    ),
    cwd: CwdOpt = None,
    list_rules: bool = typer.Option(False, "--list-rules", help="Print the rule catalog."),
    explain: str | None = typer.Option(
        None, "--explain", metavar="CODE", help="Print one rule's documentation.",
        autocompletion=completion.rule_codes,
    ),
) -> None:
    """Check policy files for mistakes that weaken plan mode: the rule catalog GLxxx."""
    if list_rules:
        for r in RULES.values():
            typer.echo(f"{r.code}  {r.name:<28} {r.level.value:<8} {r.summary}")
        return
    if explain is not None:
        found = RULES.get(explain.upper())
        if found is None:
            raise GuardError(f"no lint rule {explain!r}; `guard lint --list-rules` lists them")
        typer.echo(rule_page(found), nl=False)
        return
    options = LintOptions(
        files=list(files or []),
        output_format=output_format.value,
        fail_level=fail_level.value,
        config=config,
        cwd=cwd,
    )
    code = run_lint(options)
    if code:
        raise typer.Exit(code)


class ReviewFormat(StrEnum):
    markdown = "markdown"
    json = "json"
    html = "html"


@commands.command(
    "review",
    epilog=(
        "Examples:\n\n"
        "  guard review                          # markdown report for this repository\n\n"
        "  guard review --format json > review.json\n\n"
        "  guard review --policy builtin:readonly --agent readonly\n\n"
        "  guard review --transcripts ~/.claude/projects/-home-me-repo/  # + sessions\n\n"
        "  guard review --fleet examples/fleet/decisions.jsonl   # exit 3: a stale one\n\n"
        "  guard review --fleet examples/fleet/ --format html -o fleet.html   # exit 3\n\n"
        "Exit status: 0 when no operation gets through, 3 when a plan agent could complete"
        " a write (or the tool-call analysis layer is missing), 2 for bad input. With"
        " --fleet: 3 when a machine runs a stale policy, had a hook skipped or ran"
        " unconfined, or a record does not verify (no chain keys, a MAC that does not"
        " match a --key, records missing from a chain), else 0."
    ),
)
def review_command(
    policy: str | None = typer.Option(
        None, "--policy", "-p", help="Policy file or builtin:NAME. Default: discovered."
    ),
    agent: str | None = typer.Option(
        None, "--agent", "-a", help="Plan-mode agent to review. Default: the policy's plan agent."
    ),
    output_format: ReviewFormat = typer.Option(
        ReviewFormat.markdown, "--format", "-f", help="Output format."
    ),
    transcripts: list[str] | None = typer.Option(
        None,
        "--transcripts",
        help="Also replay these host transcripts (files or directories, as guard replay"
        " reads them): how many calls of those sessions the plan agent would have blocked.",
    ),
    fleet: Path | None = typer.Option(
        None,
        "--fleet",
        help="Report on a fleet instead: the central rsyslog's JSON lines, or a directory of"
        " audit logs (machines, sessions, decisions by agent and rule, stale policy digests,"
        " skipped hooks, confinement unavailable). Formats: markdown (a table), json, html.",
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write the report here (default: stdout)."
    ),
    key: list[Path] | None = typer.Option(
        None,
        "--key",
        metavar="FILE",
        help="With --fleet: a machine's audit key (<data>/keys/audit.key of the machine and"
        " user that wrote the records), repeated for several; each record's MAC is then"
        " checked. Without it only the form of the chain keys is.",
    ),
    cwd: Path | None = typer.Option(
        None, "--cwd", "-C", metavar="DIR",
        help="Review the repository at DIR, and replay --transcripts against it (as guard"
        " replay --cwd DIR does). Default: the current directory.",
    ),
) -> None:
    """Security review of plan-mode isolation here: active layers and a red-team matrix.

    Every operation of the built-in corpus (writes through each tool of each agent
    dialect, shell tricks, symlinks, traversal, protected files) is decided for the
    plan agent; any that it could complete is flagged.
    """
    if fleet is not None:
        _fleet_review(fleet, output_format, output, key or [])
        return
    if key:
        raise GuardError("--key is for --fleet (guard audit verify takes a key for one log)")
    if output_format is ReviewFormat.html:
        raise GuardError("--format html is for --fleet (guard replay --format html renders"
                         " past sessions)")

    def json_text(review: Any) -> str:
        return json.dumps(with_schema(review.to_json()), indent=2) + "\n"

    def progress(op_id: str) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\rguard review: {op_id:<30}")
            sys.stderr.flush()

    a_directory(cwd)
    review = run_review(policy, agent, cwd=os.fspath(cwd) if cwd is not None else None,
                        progress=progress, transcripts=transcripts)
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 45 + "\r")
    text = json_text(review) if output_format is ReviewFormat.json else to_markdown(review)
    _emit(text, output)
    if review.failed():
        raise typer.Exit(3)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    tmp = output.with_name(f".{output.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, output)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise GuardError(f"--output {output}: {exc.strerror or exc}") from None


def _fleet_review(
    path: Path, output_format: ReviewFormat, output: Path | None, key_files: list[Path]
) -> None:
    try:
        keys = tuple(load_key(k, create=False) for k in key_files)
    except AuditError as exc:
        raise GuardError(f"--key: {exc}") from None
    rep = build(path, keys=keys)
    if output_format is ReviewFormat.json:
        text = json.dumps(with_schema(rep.to_json()), indent=2) + "\n"
    elif output_format is ReviewFormat.html:
        buf = io.StringIO()
        write_html(rep, buf)
        text = buf.getvalue()
    else:
        text = to_table(rep)
    _emit(text, output)
    if output is not None:
        sys.stderr.write(f"guard review: wrote {output} ({rep.records} records,"
                         f" {len(rep.machines)} machines)\n")
    if rep.findings():
        raise typer.Exit(3)
