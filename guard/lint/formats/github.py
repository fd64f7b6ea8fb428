"""GitHub Actions workflow commands: one annotation per finding."""

from __future__ import annotations

from guard.lint.findings import RULES, Level, Report
from guard.lint.formats.format import Formatter

_COMMAND = {Level.ERROR: "error", Level.WARNING: "warning", Level.NOTE: "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


class GithubFormatter(Formatter):
    name = "github"

    def format(self, report: Report) -> str:
        lines = []
        for f in report.findings:
            rule = RULES.get(f.code)
            title = f"{f.code} {rule.name}" if rule else f.code
            message = f.message + (f" (fix: {f.fix})" if f.fix else "")
            lines.append(
                f"::{_COMMAND[f.level]} file={_prop(f.file)},line={f.line},"
                f"title={_prop(title)}::{_data(message)}"
            )
        return "".join(line + "\n" for line in lines)
