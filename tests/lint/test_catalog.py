"""The catalog: every rule triggers on its documented bad example and not on its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard.lint import RULES, lint_paths
from guard.lint.docs import index_page, rule_page
from guard.policy import builtin_names

from .helpers import codes, complete, lint_text

REPO = Path(__file__).resolve().parents[2]
# GL301 needs two files (test_extends.py), GL401 a managed layer (tests/fleet/test_managed_lint.py)
SINGLE_FILE = [c for c in RULES if c not in ("GL301", "GL401")]


def test_codes_are_stable_and_unique() -> None:
    assert list(RULES) == sorted(RULES)
    assert all(len(c) == 5 and c.startswith("GL") for c in RULES)
    assert len({r.name for r in RULES.values()}) == len(RULES)


@pytest.mark.parametrize("code", SINGLE_FILE)
def test_rule_fires_on_its_bad_example(tmp_path: Path, code: str) -> None:
    found = lint_text(tmp_path, complete(RULES[code].bad))
    assert code in codes(found), [(f.code, f.message) for f in found]


@pytest.mark.parametrize("code", SINGLE_FILE)
def test_rule_is_quiet_on_its_fixed_example(tmp_path: Path, code: str) -> None:
    assert RULES[code].good, f"{code} documents no fixed example"
    found = lint_text(tmp_path, complete(RULES[code].good))
    assert code not in codes(found), [(f.code, f.message) for f in found]


@pytest.mark.parametrize("name", builtin_names())
def test_shipped_policies_lint_clean(name: str) -> None:
    """The built-in policies have no finding at any level."""
    assert lint_paths([f"builtin:{name}"]).findings == []


def test_policies_directory_lints_clean() -> None:
    report = lint_paths([str(REPO / "policies")])
    assert len(report.files) >= 2
    assert report.findings == []


@pytest.mark.parametrize("code", list(RULES))
def test_every_rule_has_its_page(code: str) -> None:
    page = REPO / "docs" / "rules" / f"{code}.md"
    assert page.read_text(encoding="utf-8") == rule_page(RULES[code]), (
        "regenerate with: python -m guard.lint.docs docs/rules"
    )
    for heading in ("## What it does", "## Why it matters", "## Example", "## How to fix"):
        assert heading in page.read_text(encoding="utf-8")


def test_rule_index_is_current() -> None:
    assert (REPO / "docs/rules/README.md").read_text(encoding="utf-8") == index_page()


def test_misspelt_kind_suggests_the_right_one(tmp_path: Path) -> None:
    found = lint_text(tmp_path, complete('[agents.plan.writes]\nallow = ["{plans}/*.md"]'))
    (f,) = [f for f in found if f.code == "GL002"]
    assert "'writes'" in f.message and "did you mean 'write'" in f.fix and f.line == 2


def test_bad_lint_table_in_a_policy_is_a_located_gl001(tmp_path: Path) -> None:
    text = complete('[lint]\nignore = ["GL999"]\n[agents.build.tools]\n"*" = "allow"')
    (f,) = lint_text(tmp_path, text)
    assert f.code == "GL001" and f.line == 2 and "GL999" in f.message


def test_missing_extends_parent_is_a_gl001_in_the_child(tmp_path: Path) -> None:
    (f,) = lint_text(tmp_path, 'version = 1\nextends = ["gone.toml"]\n')
    assert f.code == "GL001" and f.line == 2 and "does not exist" in f.message


def test_an_unknown_wall_in_sandbox_require_is_a_located_gl001(tmp_path: Path) -> None:
    text = complete('[agents.plan.sandbox]\nrequire = ["network", "everything"]')
    (f,) = [f for f in lint_text(tmp_path, text) if f.code == "GL001"]
    assert text.splitlines()[f.line - 1].startswith("require"), f
    assert "'network', 'ipc', 'processes' or 'metadata'" in f.message, f
    assert "everything" in f.message


def test_an_unknown_root_in_sandbox_sockets_is_a_located_gl001(tmp_path: Path) -> None:
    text = complete('[agents.plan.sandbox]\nsockets = ["{nowhere}/x.sock"]')
    (f,) = [f for f in lint_text(tmp_path, text) if f.code == "GL001"]
    assert text.splitlines()[f.line - 1].startswith("sockets"), f
    assert "unknown root {nowhere}" in f.message, f
