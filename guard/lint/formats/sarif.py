"""SARIF 2.1.0, for code-scanning dashboards (validated against the schema in tests)."""

from __future__ import annotations

import json
from typing import Any

from guard.lint.docs import rule_page
from guard.lint.findings import RULES, Level, Report
from guard.lint.formats.format import Formatter
from guard.version import __version__

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(file: str) -> str:
    return file.replace("\\", "/").replace(" ", "%20")


class SarifFormatter(Formatter):
    name = "sarif"

    def format(self, report: Report) -> str:
        codes = list(RULES)
        rules: list[dict[str, Any]] = [
            {
                "id": r.code,
                "name": r.name,
                "shortDescription": {"text": r.summary},
                "fullDescription": {"text": r.why},
                "help": {"text": f"{r.fix} (see {r.help_uri})", "markdown": rule_page(r)},
                "defaultConfiguration": {
                    "level": r.level.value if r.level is not Level.OFF else "none"
                },
            }
            for r in RULES.values()
        ]
        results: list[dict[str, Any]] = []
        for f in report.findings:
            text = f.message + (f" Fix: {f.fix}." if f.fix else "")
            results.append(
                {
                    "ruleId": f.code,
                    "ruleIndex": codes.index(f.code),
                    "level": f.level.value,
                    "message": {"text": text},
                    "locations": [
                        {
                            "physicalLocation": {
                                "artifactLocation": {"uri": _uri(f.file)},
                                "region": {"startLine": max(f.line, 1)},
                            }
                        }
                    ],
                }
            )
        log = {
            "$schema": SCHEMA_URI,
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {
                        "driver": {
                            "name": "guard-lint",
                            "fullName": "OpenOxide Guard policy linter",
                            "version": __version__,
                            "rules": rules,
                        }
                    },
                    "artifacts": [{"location": {"uri": _uri(f)}} for f in report.files],
                    "results": results,
                }
            ],
        }
        return json.dumps(log, indent=2) + "\n"
