"""Lint configuration: ``[tool.guard.lint]`` in pyproject.toml and ``[lint]`` in a policy.

Both take the same keys::

    ignore = ["GL105"]              # rules not to run
    [levels]                        # (``[tool.guard.lint.levels]`` / ``[lint.levels]``)
    GL104 = "error"                 # error | warning | note | off

A policy's own ``[lint]`` table is applied on top of pyproject's for that file.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from guard.effects import GuardError
from guard.lint.findings import RULES, Level


class LintConfigError(GuardError):
    """A configuration that cannot be used; the message names the file and key."""


@dataclass(frozen=True)
class LintConfig:
    levels: Mapping[str, Level] = field(default_factory=dict)
    source: str = ""

    def level(self, code: str) -> Level:
        got = self.levels.get(code)
        return got if got is not None else RULES[code].level

    def merged(self, other: LintConfig) -> LintConfig:
        return LintConfig({**self.levels, **other.levels}, other.source or self.source)


def parse_config(table: object, where: str) -> LintConfig:
    """Validate one lint table; ``where`` names it in errors (``FILE: [tool.guard.lint]``)."""
    if not isinstance(table, Mapping):
        raise LintConfigError(f"{where}: expected a table, got {type(table).__name__}")
    levels: dict[str, Level] = {}
    for key in table:
        if key not in ("ignore", "levels"):
            raise LintConfigError(f"{where}: unknown key {key!r}; allowed: ignore, levels")
    ignore = table.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(c, str) for c in ignore):
        raise LintConfigError(f'{where}.ignore: expected a list of rule codes, e.g. ["GL105"]')
    for code in ignore:
        _check_code(code, f"{where}.ignore")
        levels[code] = Level.OFF
    raw_levels = table.get("levels", {})
    if not isinstance(raw_levels, Mapping):
        raise LintConfigError(f'{where}.levels: expected a table, e.g. GL104 = "error"')
    for code, value in raw_levels.items():
        _check_code(code, f"{where}.levels")
        try:
            levels[code] = Level(value)
        except ValueError:
            raise LintConfigError(
                f"{where}.levels.{code}: expected one of error, warning, note, off;"
                f" got {value!r}"
            ) from None
    return LintConfig(levels, where)


def _check_code(code: str, where: str) -> None:
    if code not in RULES:
        raise LintConfigError(
            f"{where}: unknown rule code {code!r}; `guard lint --list-rules` shows the catalog"
        )


def find_pyproject(start: Path) -> Path | None:
    here = start.resolve()
    for d in (here, *here.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_pyproject_config(path: Path | None) -> LintConfig:
    """The ``[tool.guard.lint]`` table of ``path`` (empty config when absent)."""
    if path is None:
        return LintConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise LintConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise LintConfigError(f"{path}: invalid TOML: {exc}") from None
    tool = data.get("tool", {})
    table = tool.get("guard", {}).get("lint") if isinstance(tool, dict) else None
    if table is None:
        return LintConfig()
    return parse_config(table, f"{path}: [tool.guard.lint]")
