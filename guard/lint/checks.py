"""A rule's check: a function of the :class:`~guard.lint.rule_context.LintContext`.

The ``@rule`` decorator registers the rule's metadata in
:data:`guard.lint.findings.RULES` and binds the decorated function as its check in
:data:`CHECKS`. The check lives here, above both the vocabulary
(:mod:`guard.lint.findings`) and what a rule sees (:mod:`guard.lint.rule_context`),
so that neither of those two needs the other's names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from guard.lint.findings import Finding, Level, Rule, register
from guard.lint.rule_context import LintContext

Check = Callable[[LintContext], Iterable[Finding]]

#: Each rule's check by code, in catalog order (the same keys as ``RULES``).
CHECKS: dict[str, Check] = {}


def rule(
    code: str,
    name: str,
    level: Level,
    summary: str,
    *,
    why: str,
    bad: str,
    fix: str,
    good: str = "",
) -> Callable[[Check], Check]:
    """Register the decorated function as the check of a new rule."""

    def deco(fn: Check) -> Check:
        register(Rule(code, name, level, summary, why, bad, fix, good))
        CHECKS[code] = fn
        return fn

    return deco
