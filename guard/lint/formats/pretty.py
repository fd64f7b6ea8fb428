"""Human output (rich): one block per finding, a summary line last."""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape

from guard.lint.formats.interface import Formatter
from guard.lint.model import Level, Report

_STYLE = {Level.ERROR: "bold red", Level.WARNING: "yellow", Level.NOTE: "cyan"}


class PrettyFormatter(Formatter):
    name = "pretty"

    def __init__(self, color: bool | None = None, width: int = 100) -> None:
        self.color = color
        self.width = width

    def format(self, report: Report) -> str:
        buf = io.StringIO()
        console = Console(
            file=buf,
            force_terminal=bool(self.color),
            no_color=not self.color,
            color_system="auto" if self.color else None,
            width=self.width,
            highlight=False,
            soft_wrap=True,
        )
        for f in report.findings:
            console.print(
                f"[bold]{escape(f.file)}:{f.line}[/]: [{_STYLE[f.level]}]{f.code}"
                f" {f.level.value}[/]: {escape(f.message)}"
            )
            if f.fix:
                console.print(f"    [dim]fix:[/] {escape(f.fix)}")
        s = report.summary()
        if report.findings:
            console.print(
                f"{s['errors']} error(s), {s['warnings']} warning(s), {s['notes']} note(s)"
                f" in {s['files']} file(s). `guard lint --explain CODE` tells more."
            )
        else:
            console.print(f"[green]No findings[/] in {s['files']} file(s).")
        return buf.getvalue()
