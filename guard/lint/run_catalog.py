"""Running the catalog over policy files."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from guard.effects import GuardError
from guard.lint import rules as _rules  # noqa: F401  (registers the catalog)
from guard.lint.checks import CHECKS
from guard.lint.config import LintConfig, LintConfigError, parse_config
from guard.lint.findings import RULES, Finding, Level, Report
from guard.lint.rule_context import LintContext
from guard.lint.rules.schema_rules import findings_from_problems
from guard.policy import BUILTIN_PREFIX, PolicyError, load_policy, locate_line

POLICY_SUFFIXES = (".toml", ".json")
NOT_POLICIES = frozenset({"pyproject.toml", "package.json", "package-lock.json", "tsconfig.json"})


def expand_targets(targets: Iterable[str]) -> list[str]:
    """Files to lint: files as given, directories searched for *.toml / *.json."""
    out: list[str] = []
    for t in targets:
        if t.startswith(BUILTIN_PREFIX):
            out.append(t)
            continue
        path = Path(t)
        if path.is_dir():
            found = sorted(
                str(p)
                for p in path.rglob("*")
                if p.is_file()
                and p.suffix in POLICY_SUFFIXES
                and p.name not in NOT_POLICIES
                and not any(part.startswith(".") and part not in (".openoxide",)
                            for part in p.relative_to(path).parts[:-1])
            )
            if not found:
                raise GuardError(f"{t}: directory has no policy files (*.toml, *.json)")
            out.extend(found)
        else:
            out.append(t)
    return out


def _check_readable(target: str) -> None:
    if target.startswith(BUILTIN_PREFIX):
        return
    path = Path(target)
    if not path.exists():
        raise GuardError(f"{target}: no such file; pass a policy file or a directory of them")
    if not path.is_file():
        raise GuardError(f"{target}: not a regular file")
    if not os.access(path, os.R_OK):
        raise GuardError(f"{target}: permission denied")
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GuardError(f"{target}: not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    except OSError as exc:
        raise GuardError(f"{target}: cannot read: {exc.strerror}") from None


def lint_file(target: str, config: LintConfig | None = None) -> list[Finding]:
    """Findings for one policy file (levels applied, ``off`` rules dropped)."""
    config = config or LintConfig()
    _check_readable(target)
    try:
        loaded = load_policy(target)
    except PolicyError as exc:
        return _apply(findings_from_problems(exc.problems, target), config)
    if loaded.model.lint:
        try:
            config = config.merged(parse_config(loaded.model.lint, f"{loaded.name}: [lint]"))
        except LintConfigError as exc:
            line = locate_line(loaded.texts.get(loaded.name, ""), ("lint",))
            bad = Finding("GL001", str(exc), loaded.name, line, "fix the [lint] table")
            return _apply([bad], config)
    ctx = LintContext(loaded, target)
    found: list[Finding] = []
    for code, r in RULES.items():
        check = CHECKS.get(code)
        if check is None or config.level(code) is Level.OFF:
            continue
        try:
            found.extend(check(ctx))
        except Exception as exc:  # a crashing rule must not pass silently
            raise GuardError(
                f"{target}: lint rule {code} ({r.name}) failed: {type(exc).__name__}: {exc};"
                " please report this"
            ) from exc
    return _apply(found, config)


def _apply(found: Iterable[Finding], config: LintConfig) -> list[Finding]:
    out: list[Finding] = []
    for f in found:
        level = config.level(f.code)
        if level is Level.OFF:
            continue
        out.append(Finding(f.code, f.message, f.file, f.line, f.fix, level))
    return out


def _relative(f: Finding) -> Finding:
    if not os.path.isabs(f.file):
        return f
    rel = os.path.relpath(f.file)
    if rel.startswith(".."):
        return f
    return Finding(f.code, f.message, rel, f.line, f.fix, f.level)


def lint_paths(
    targets: Iterable[str],
    config: LintConfig | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Lint every file in ``targets`` (files, directories, builtin:NAME)."""
    report = Report()
    seen: set[tuple[str, str, int, str]] = set()
    for target in expand_targets(targets):
        if progress is not None:
            progress(target)
        report.files.append(target)
        for f in lint_file(target, config):
            f = _relative(f)
            key = (f.code, f.file, f.line, f.message)
            if key not in seen:
                seen.add(key)
                report.findings.append(f)
    report.findings.sort(key=lambda f: (f.file, f.line, f.code))
    return report
