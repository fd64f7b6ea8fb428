"""The lint vocabulary: levels, rules with stable codes, findings, a report."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

DOCS_BASE = "docs/rules"  # relative to the repository root


class Level(enum.StrEnum):
    """How serious a finding is; ``off`` disables a rule."""

    OFF = "off"
    NOTE = "note"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Level.OFF: 0, Level.NOTE: 1, Level.WARNING: 2, Level.ERROR: 3}

@dataclass(frozen=True, slots=True)
class Rule:
    """One lint rule: a stable code, a name, a default level and its documentation."""

    code: str
    name: str
    level: Level
    summary: str  # one line: what it finds
    why: str  # why it matters
    bad: str  # an example that triggers it (policy TOML)
    fix: str  # how to fix it
    good: str = ""  # the fixed example

    @property
    def help_uri(self) -> str:
        return f"{DOCS_BASE}/{self.code}.md"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found at a file and line."""

    code: str
    message: str
    file: str
    line: int
    fix: str = ""
    level: Level = Level.ERROR  # set from the rule's level and the configuration

    def to_json(self) -> dict[str, object]:
        rule = RULES.get(self.code)
        return {
            "code": self.code,
            "name": rule.name if rule else self.code,
            "level": self.level.value,
            "file": self.file,
            "line": self.line,
            "message": self.message,
            "fix": self.fix,
            "help": rule.help_uri if rule else "",
        }


@dataclass
class Report:
    """The outcome of linting some files."""

    files: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def count(self, level: Level) -> int:
        return sum(1 for f in self.findings if f.level is level)

    def worst(self) -> Level:
        return max((f.level for f in self.findings), key=lambda lv: lv.rank, default=Level.OFF)

    def fails(self, fail_level: Level) -> bool:
        return any(f.level.rank >= fail_level.rank for f in self.findings)

    def summary(self) -> dict[str, int]:
        return {
            "files": len(self.files),
            "errors": self.count(Level.ERROR),
            "warnings": self.count(Level.WARNING),
            "notes": self.count(Level.NOTE),
        }


#: Every rule by code, in catalog order. Filled by :mod:`guard.lint.rules` through
#: :func:`guard.lint.checks.rule`, which also binds each rule's check.
RULES: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    if rule.code in RULES:
        raise ValueError(f"duplicate lint rule code {rule.code}")
    RULES[rule.code] = rule
    return rule

