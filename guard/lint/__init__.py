"""``guard lint``: is the policy itself sound? Rules with stable codes, several formats.

>>> from guard.lint import lint_paths
>>> lint_paths(["builtin:default"]).findings
[]
"""

from guard.lint.config import LintConfig, LintConfigError, load_pyproject_config, parse_config
from guard.lint.findings import RULES, Finding, Level, Report, Rule
from guard.lint.run_catalog import expand_targets, lint_file, lint_paths

__all__ = [
    "RULES",
    "Finding",
    "Level",
    "LintConfig",
    "LintConfigError",
    "Report",
    "Rule",
    "expand_targets",
    "lint_file",
    "lint_paths",
    "load_pyproject_config",
    "parse_config",
]
