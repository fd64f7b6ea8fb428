"""`guard replay`: decide the tool calls of past agent sessions, as a policy would have."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.progress import Progress

from guard import hosts
from guard.cli._base import a_directory, installed_version, warn
from guard.cli._io import printable
from guard.cli._typer import console
from guard.cli.options import AgentOpt, PolicyOpt
from guard.plaintext import visible
from guard.replay.engine import check_host, transcripts
from guard.replay.engine import replay as run
from guard.replay.output import Summary, sarif, short, write_html, write_json

commands = typer.Typer()  # added to guard's application by guard.cli._app

if TYPE_CHECKING:
    from guard.replay.model import ReplayCall, ReplayResult
    from guard.replay.output import Summary

#: Files larger than this (bytes, all transcripts together) get a progress bar on a terminal.
PROGRESS_BYTES = 2_000_000


class Format(StrEnum):
    table = "table"
    json = "json"
    sarif = "sarif"
    html = "html"


HOSTS_HELP = (
    f"auto (recognise each file), {', '.join(hosts.REPLAYABLE)}, or audit (guard's"
    " audit log: the connections its egress proxy decided)."
)


HELP = (
    "What would the policy have decided for the tool calls of past sessions?\n\n"
    "Reads host transcripts (Claude Code, Codex, Gemini CLI, OpenCode), or the connections"
    " guard's egress proxy recorded in the audit log, line by line and"
    " decides every call through the same gate the hooks use, for AGENT (default: plan),"
    " against the cwd the call had: a table and a summary, or JSON, SARIF, HTML."
)


@commands.command(
    "replay",
    help=HELP,
    epilog=(
        "Examples:\n\n"
        "  guard replay ~/.claude/projects/-home-me-repo/   # every session there\n\n"
        "  guard replay ~/.codex/sessions/2026/ --format html -o review.html\n\n"
        "  guard replay session.jsonl --agent plan --json \\\n"
        "    | jq '.calls[] | select(.decision != \"allow\")'\n\n"
        "  guard replay --format sarif -o replay.sarif ~/.gemini/tmp/\n\n"
        "Transcripts: Claude Code ~/.claude/projects/*/*.jsonl, Codex"
        " ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl, Gemini CLI"
        " ~/.gemini/tmp/*/chats/session-*, OpenCode `opencode export SESSION > s.json`;"
        " guard's audit log (~/.local/share/openoxide/audit/*.jsonl) for the connections"
        " its egress proxy decided.\n\n"
        "Nothing is written to the audit log and no session state is touched. Exit codes:"
        " 0 every call allowed, 3 some call denied or asked, 2 bad input (FILE:LINE: what is"
        " wrong). See docs/replay.md."
    ),
)
def replay(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Transcript files, or directories to replay every transcript under.",
                       metavar="TRANSCRIPT..."),
    ],
    host: Annotated[str, typer.Option("--host", help=HOSTS_HELP)] = "auto",
    agent: AgentOpt = "plan",
    policy: PolicyOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="table, json, sarif or html.")
    ] = Format.table,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the report to FILE, not stdout.")
    ] = None,
    cwd: Annotated[
        Path | None,
        typer.Option(
            "--cwd",
            "-C",
            metavar="DIR",
            help="Replay every call against DIR (a checkout of the project the transcripts"
            " ran in): each call's cwd, and the paths of its input under that cwd, move"
            " there. Without it, a cwd that does not exist here is re-rooted through its"
            " nearest existing folder, and the report says so.",
        ),
    ] = None,
) -> None:
    """Replay transcripts through the gate (see HELP)."""
    check_host(host)  # before any output is written
    a_directory(cwd)
    if as_json:
        fmt = Format.json
    files = transcripts(paths)
    where = os.path.realpath(cwd) if cwd is not None else None
    with _progress(files) as tick, _target(output) as out:
        results = run(files, host=host, agent=agent, policy=policy, progress=tick, cwd=where)
        if fmt is Format.json:
            summary = write_json(results, out)
        elif fmt is Format.sarif:
            log, summary = sarif(results, agent, installed_version())
            out.write(json.dumps(log, indent=2) + "\n")
        elif fmt is Format.html:
            summary = write_html(results, out, agent, policy or "the worktree's (or default)")
        else:
            summary = _table(results, out)
    note = summary.missing_note()
    if output is not None and fmt is not Format.table:
        counts = summary.lines()[1 if note else 0]
        console(stderr=True).print(escape(counts) + f" -> {escape(str(output))}")
    if note is not None and (fmt is not Format.table or output is not None):
        warn(note)  # the table says it itself
    raise typer.Exit(3 if summary.blocked else 0)


@contextlib.contextmanager
def _target(output: Path | None) -> Iterator[IO[str]]:
    if output is None:
        yield sys.stdout
        return
    with output.open("w", encoding="utf-8") as f:
        yield f


@contextlib.contextmanager
def _progress(files: list[Path]) -> Iterator[Callable[[ReplayCall], None] | None]:
    """A progress bar over the transcripts' bytes on a terminal (stderr), else nothing."""
    total = sum(f.stat().st_size for f in files)
    if not sys.stderr.isatty() or total < PROGRESS_BYTES:
        yield None
        return

    sizes = {str(f): f.stat().st_size for f in files}
    with Progress(console=console(stderr=True), transient=True) as bar:
        task = bar.add_task("replaying", total=total)
        done: set[str] = set()

        def tick(call: ReplayCall) -> None:
            name = call.file
            if name not in done:
                done.add(name)
                bar.update(task, advance=sizes.get(name, 0))

        yield tick


def _table(results: Iterable[ReplayResult], out: IO[str]) -> Summary:
    s = Summary()
    con = console() if out is sys.stdout else None
    colors = {"allow": "green", "allow_confined": "cyan", "ask": "yellow", "deny": "red"}
    for r in results:
        s.add(r)
        c = r.call
        side = " (sub-agent)" if c.sidechain else ""
        time = (c.time or "")[11:19] or "-"
        tool, shown = printable(c.tool)[:18], printable(short(c.input, 48))
        head = f"{r.index:>4} {time:8} {tool:18} {shown:48}"
        shown_decision = "CONFINED" if r.decision == "allow_confined" else r.decision.upper()
        if con is not None:
            con.print(f"{escape(head)} [bold {colors[r.decision]}]{shown_decision:5}[/]"
                      f" [dim]{escape(printable(r.rule))}{escape(side)}[/]")
        else:
            out.write(f"{head} {shown_decision:5} {printable(r.rule)}{side}\n")
    lines = s.lines()
    note = s.missing_note()
    if con is not None:
        if note is not None:
            con.print("\n[bold yellow]" + escape(visible(lines[0])) + "[/]")
            lines = lines[1:]
        con.print("\n" + escape(visible("\n".join(lines))))
    else:
        out.write("\n" + visible("\n".join(lines)) + "\n")
    return s
