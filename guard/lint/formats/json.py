"""Machine-readable JSON: findings, files and a summary."""

from __future__ import annotations

import json

from guard.lint.findings import Report
from guard.lint.formats.format import Formatter


class JsonFormatter(Formatter):
    name = "json"

    def format(self, report: Report) -> str:
        data = {
            "schema_version": 1,
            "files": report.files,
            "findings": [f.to_json() for f in report.findings],
            "summary": report.summary(),
        }
        return json.dumps(data, indent=2) + "\n"
