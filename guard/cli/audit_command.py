"""`guard audit verify`: check the HMAC chain of an audit log."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from guard.audit import AuditError, chain, logfile
from guard.audit import verify as chain_check
from guard.cli._base import enter, fail_for, print_json, with_schema
from guard.cli._typer import console
from guard.cli.options import CwdOpt, JsonOpt
from guard.paths import Roots

commands = typer.Typer()  # added to guard's application by guard.cli._app

audit_app = typer.Typer(
    help=(
        "The audit log's integrity: `verify` checks the HMAC chain of its records"
        " (SECURITY.md, \"Audit trail\")."
    ),
    no_args_is_help=True,
)
commands.add_typer(audit_app, name="audit")


@audit_app.command(
    "verify",
    epilog=(
        "Examples (the project's log when LOG is left out):\n\n"
        "  guard check --audit-log a.jsonl write src/app.py; guard audit verify a.jsonl\n\n"
        "  guard check --audit-log a.jsonl read x; guard audit verify a.jsonl --json\n\n"
        "Keep the head it prints somewhere the agent cannot write, and later pass it back:"
        " --head N:MAC fails when that record is gone (the log was cut at its end).\n\n"
        "Records a collector received (shipped through syslog, one JSON record a line):\n\n"
        "  guard audit verify --shipped /var/log/guard/decisions.jsonl \\\n"
        "    --host $(hostname)"
    ),
)
def verify(
    log: Annotated[
        Path | None,
        typer.Argument(
            metavar="LOG",
            help="The audit log (its rotated parts LOG.1, LOG.2 ... are read first)."
            " Default: the project's, <data>/audit/<project>.jsonl.",
        ),
    ] = None,
    head: Annotated[
        str | None,
        typer.Option(
            metavar="N:MAC",
            help="A head printed by an earlier run: the log must still hold that record"
            " (finds records cut from its end).",
        ),
    ] = None,
    key: Annotated[
        list[Path] | None,
        typer.Option(
            metavar="FILE",
            help="The key. Default: <data>/keys/audit.key. With --shipped, repeat it for"
            " the keys of several machines or users.",
        ),
    ] = None,
    shipped: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Check records shipped through syslog, as a collector wrote them (one"
            " JSON record a line; docs/fleet.md), instead of a local log.",
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="With --shipped: check this machine's records only."),
    ] = None,
    cwd: CwdOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check the audit log's HMAC chain: every forged, edited, moved or removed record.

    Prints each break as LOG:LINE: what is wrong, then the head (the last record's number and MAC; keep it elsewhere and pass it back with --head to find records cut from the end). Exit codes: 0 intact, 1 broken, 2 no log, no key or bad input.
    """  # noqa: E501 (one paragraph: the help wraps it)
    enter(cwd)
    try:
        if shipped is not None:
            if log is not None or head is not None:
                raise AuditError(
                    "--shipped checks a collector's file: give it without LOG and --head"
                )
            path = shipped
            secrets = [chain.load_key(k, create=False) for k in key or [chain.key_path()]]
            result = chain_check.verify_shipped(path, secrets, host)
        else:
            if host is not None or (key is not None and len(key) > 1):
                raise AuditError(
                    "a local log has one key and one machine: --host and a second --key"
                    " go with --shipped"
                )
            path = log if log is not None else logfile.default_log_path(Roots.discover())
            anchor = chain_check.parse_head(head) if head is not None else None
            secret = chain.load_key(key[0] if key else None, create=False)
            result = chain_check.verify(path, secret, anchor)
    except AuditError as exc:
        fail_for(exc, as_json=as_json)
    out = console()
    head_text = f"{result.head[0]}:{result.head[1]}" if result.head else None
    if as_json:
        print_json(
            with_schema(
                {
                    "log": str(path),
                    "intact": result.intact,
                    "records": result.records,
                    "head": head_text,
                    "findings": [
                        {"file": str(f.path), "line": f.line, "problem": f.problem}
                        for f in result.findings
                    ],
                    "notes": [
                        {"file": str(f.path), "line": f.line, "problem": f.problem}
                        for f in result.notes
                    ],
                }
            )
        )
    else:
        for f in result.findings:
            out.print(str(f), markup=False, soft_wrap=True)
        for f in result.notes:
            out.print(f"note: {f}", markup=False, soft_wrap=True)
        if shipped is not None:
            out.print(
                f"{path}: {result.records} shipped records, "
                + ("every one verified" if result.intact
                   else f"{len(result.findings)} problem(s)"),
                markup=False, soft_wrap=True,
            )  # fmt: skip
        elif result.intact:
            out.print(
                f"{path}: {result.records} records, chain intact; head {head_text or 'none'}",
                markup=False, soft_wrap=True,
            )  # fmt: skip
        else:
            out.print(
                f"{path}: {len(result.findings)} break(s) in {result.records} records;"
                f" head {head_text or 'none'}",
                markup=False, soft_wrap=True,
            )  # fmt: skip
    raise typer.Exit(0 if result.intact else 1)
