"""`guard watch` and `guard quarantine list|show|restore`."""

from __future__ import annotations

# Lazy imports: the monitor (watchdog) loads when a watch or quarantine command runs (CLI start-up).
import json
import re
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from guard.cli._base import a_worktree, enter, print_json, with_schema
from guard.cli._typer import console
from guard.cli.options import CwdOpt, JsonOpt, WorktreeOpt
from guard.cli.show import print_violation
from guard.decide import Guard
from guard.effects import GuardError
from guard.paths import Roots, no_worktree_note

if TYPE_CHECKING:
    from guard.monitor import Notice, Violation

commands = typer.Typer()  # added to guard's application by guard.cli._app

quarantine_app = typer.Typer(
    help=(
        "Inspect and restore what `guard watch --restore` moved aside.\n\n"
        "  guard quarantine list                       # every item, oldest first\n\n"
        "  guard quarantine show 20261202T151819Z-3a9f1c/20261202T151820.001Z\n\n"
        "  guard quarantine restore <id>               # put it back where it was\n\n"
        "  guard quarantine restore <id> --force       # ...quarantining what is there now\n\n"
        "  guard quarantine restore <id> --to copy.txt # ...or put it somewhere else"
    ),
    no_args_is_help=True,
)
commands.add_typer(quarantine_app, name="quarantine")

IdArg = Annotated[
    str, typer.Argument(metavar="ID", help="<session>/<timestamp> from `guard quarantine list`.")
]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``16MiB``, ``500k``, ``1G``, ``1024`` -> bytes (powers of 1024)."""
    m = _SIZE.match(text)
    if not m:
        raise GuardError(f"--size-cap {text!r}: expected a size like 1048576, 500k, 16MiB or 1G")
    factor = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(float(m.group(1)) * factor)


def _err() -> Console:
    return console(stderr=True)


def _out() -> Console:
    return console()


@commands.command(
    epilog=(
        "Examples:\n\n"
        "  guard watch --agent plan             # report every out-of-policy change\n\n"
        "  guard watch --agent plan --restore   # ...and put things back (quarantine)\n\n"
        "  guard watch --agent plan --json | jq .    # one JSON object per line\n\n"
        "  guard watch --agent plan --reconcile-interval 10 --size-cap 64MiB\n\n"
        "Stop with Ctrl-C (or SIGTERM): a last scan runs, then a summary is printed."
    )
)
def watch(
    agent: Annotated[
        str, typer.Option("--agent", "-a", help="Agent whose policy decides (e.g. plan).")
    ] = "plan",
    worktree: WorktreeOpt = None,
    cwd: CwdOpt = None,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            "-p",
            help="Policy file or builtin:NAME. Default: $GUARD_POLICY, then"
            " <worktree>/.openoxide/policy.toml, then builtin:default.",
        ),
    ] = None,
    restore: Annotated[
        bool,
        typer.Option(
            help="Move violating versions into quarantine and restore the baseline."
            " Nothing is ever deleted."
        ),
    ] = False,
    json_out: JsonOpt = False,
    session: Annotated[
        str | None, typer.Option(help="Session id (names the quarantine directory).")
    ] = None,
    reconcile_interval: Annotated[
        float,
        typer.Option(help="Seconds between reconciliation scans against the baseline; 0 = off."),
    ] = 30.0,
    size_cap: Annotated[
        str,
        typer.Option(help="Largest untracked file copied into the baseline (e.g. 16MiB)."),
    ] = "16MiB",
    audit_log: Annotated[
        Path | None,
        typer.Option(help="Audit log (JSONL). Default: <data>/audit/<project>.jsonl."),
    ] = None,
    root: Annotated[
        list[Path] | None,
        typer.Option(help="Watch this directory instead (repeatable). Default: the worktree."),
    ] = None,
    backend: Annotated[
        str,
        typer.Option(
            help="auto (fanotify with CAP_SYS_ADMIN, else inotify), fanotify or inotify."
            " Default: $GUARD_MONITOR_BACKEND, then auto."
        ),
    ] = "auto",
) -> None:
    """Watch the worktree while an agent works: report (and with --restore undo) every change its policy does not allow.

    Each violation is printed at once and appended to the audit log. A baseline is taken first (tracked files by their git blob ids, untracked ones copied up to --size-cap). If the event queue overflows, a reconciliation scan finds what was missed; if inotify cannot watch every directory (fs.inotify.max_user_watches), it refuses to start, naming the fixes.
    """  # noqa: E501
    enter(cwd)
    a_worktree(worktree)
    g = Guard.load(policy, worktree=worktree)
    err = _err()
    out = _out()
    lock = threading.Lock()
    if g.roots.worktree is None and not root:
        note = no_worktree_note()
        if note is not None:
            err.print(f"guard watch: {note}", markup=False)

    def show_violation(v: Violation) -> None:
        with lock:
            if json_out:
                print(json.dumps(with_schema(v.to_json())), flush=True)
                return
            print_violation(out, v, g.roots)

    def show_notice(n: Notice) -> None:
        with lock:
            if json_out:
                print(json.dumps(with_schema(n.to_json())), flush=True)
            else:
                err.print(f"guard watch: {n.event}: {n.message}", markup=False)

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    task = progress.add_task("baseline: scanning", total=None)

    def on_progress(phase: str, done: int, total: int) -> None:
        progress.update(task, description=f"baseline: {phase}", completed=done,
                        total=total or None)

    from guard.monitor import Monitor

    monitor = Monitor(
        g,
        agent,
        roots=list(root) if root else None,
        restore=restore,
        session=session,
        on_violation=show_violation,
        reconcile_interval=reconcile_interval if reconcile_interval > 0 else None,
        audit_path=audit_log,
        size_cap=parse_size(size_cap),
        progress=on_progress,
        on_notice=show_notice,
        backend=backend,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    monitor.claim()  # another watcher here: refused before any progress is drawn
    with progress:
        monitor.start()
    if not json_out:
        err.print(
            f"guard watch: session {monitor.session}; audit log {monitor.audit_path};"
            " Ctrl-C to stop",
            markup=False,
        )
    try:
        while not stop.wait(0.5):
            pass
    finally:
        monitor.stop()
    if not json_out:
        err.print(
            f"guard watch: {len(monitor.violations)} violations, {monitor.overflows}"
            f" {monitor.backend.backend if monitor.backend else 'event queue'} overflows,"
            f" {monitor.reconciliations} reconciliation scans",
            markup=False,
        )
    raise typer.Exit(1 if monitor.violations else 0)


def _roots(worktree: Path | None, cwd: Path | None) -> Roots:
    enter(cwd)
    a_worktree(worktree)
    return Roots.discover(worktree=worktree)


@quarantine_app.command("list")
def list_cmd(
    worktree: WorktreeOpt = None,
    cwd: CwdOpt = None,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """List quarantined items, oldest first: id, what happened, the original path; then
    the baseline stores kept on disk (copies of what a monitor could not put back)."""
    from guard.monitor import kept_stores, list_items, quarantine_root

    roots = _roots(worktree, cwd)
    root = quarantine_root(roots)
    items = list_items(root, session)
    stores = [p for p in kept_stores(roots) if session is None or p.name == session]
    if json_out:
        print_json({"items": [i.to_json() for i in items],
                    "kept_stores": [{"session": p.name, "path": str(p)} for p in stores]},
                   indent=2)
        return
    out = _out()
    for p in stores:
        out.print(f"baseline store kept: {p} (session {p.name}; a running monitor's, or"
                  " copies of what one could not put back: delete it once you have them)",
                  markup=False)
    if not items:
        out.print(f"no quarantined items under {root}", markup=False)
        return
    for i in items:
        m = i.manifest
        state = f"restored {m['restored_at']}" if m.get("restored_at") else "quarantined"
        out.print(
            f"{i.id}  {m.get('event', '?'):<20} {m.get('kind', '?'):<7} {m['original']}  [{state}]",
            markup=False,
        )


@quarantine_app.command("show")
def show_cmd(
    item_id: IdArg,
    worktree: WorktreeOpt = None,
    cwd: CwdOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show one item's manifest (why it was moved, by which rule) and where its bytes are."""
    from guard.monitor import get_item, quarantine_root

    item = get_item(quarantine_root(_roots(worktree, cwd)), item_id)
    data: dict[str, Any] = item.to_json()
    data["stored_path"] = str(item.stored)
    if json_out:
        print_json(data, indent=2)
        return
    out = _out()
    for key in ("id", "original", "stored_path", "event", "effect", "kind", "mode", "size",
                "sha256", "stable", "target", "agent", "rule", "reason", "in_baseline",
                "restored_at"):
        if key in data and data[key] is not None:
            out.print(f"{key:>12}: {data[key]}", markup=False)


@quarantine_app.command("restore")
def restore_cmd(
    item_id: IdArg,
    worktree: WorktreeOpt = None,
    cwd: CwdOpt = None,
    to: Annotated[
        Path | None,
        typer.Option(
            "--to",
            help="Restore to this path instead of the original (it must not exist, unless"
            " --force).",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(help="If something is in the way, quarantine it first, then restore."),
    ] = False,
) -> None:
    """Move a quarantined version back (byte for byte, mode and times kept).

    Stop `guard watch` first, or it will report the restore as a change.

    Examples:

      guard quarantine restore <id>                 # to where it was

      guard quarantine restore <id> --to old-a.md   # next to the current version
    """
    from guard.monitor import get_item, quarantine_root, restore_item

    item = get_item(quarantine_root(_roots(worktree, cwd)), item_id)
    try:
        lines = restore_item(item, to=str(to) if to else None, force=force)
    except OSError as exc:
        raise GuardError(f"cannot restore {item.id}: {exc}") from exc
    for line in lines:
        print(line)
    sys.stdout.flush()
