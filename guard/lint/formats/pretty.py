"""Human output: one block per finding, a summary line last (styled on a terminal)."""

from __future__ import annotations

from guard.ansi import paint
from guard.lint.findings import Level, Report
from guard.lint.formats.format import Formatter

_STYLE = {Level.ERROR: "bold red", Level.WARNING: "yellow", Level.NOTE: "cyan"}


class PrettyFormatter(Formatter):
    name = "pretty"

    def __init__(self, color: bool | None = None, width: int = 100) -> None:
        self.color = color
        self.width = width  # kept for callers; lines are never wrapped

    def format(self, report: Report) -> str:
        on = bool(self.color)
        lines = []
        for f in report.findings:
            lines.append(
                f"{paint(f'{f.file}:{f.line}', 'bold', on)}: "
                f"{paint(f'{f.code} {f.level.value}', _STYLE[f.level], on)}: {f.message}"
            )
            if f.fix:
                lines.append(f"    {paint('fix:', 'dim', on)} {f.fix}")
        s = report.summary()
        if report.findings:
            lines.append(
                f"{s['errors']} error(s), {s['warnings']} warning(s), {s['notes']} note(s)"
                f" in {s['files']} file(s). `guard lint --explain CODE` tells more."
            )
        else:
            lines.append(f"{paint('No findings', 'green', on)} in {s['files']} file(s).")
        return "".join(line + "\n" for line in lines)
