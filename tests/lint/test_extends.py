"""GL301: a later file of an extends chain silently re-allows what an earlier one denied."""

from __future__ import annotations

from pathlib import Path

from .helpers import codes, lint_text

BASE = """version = 1
[agents.build]
mode = "build"
default = "ask"
[agents.build.tools]
webfetch = "deny"
request_user_input = "deny"
[agents.build.write]
deny = ["secrets/**"]
allow = ["**"]
"""


def test_child_replacing_deny_list_reallows(tmp_path: Path) -> None:
    """Attack: team.toml 'adds' a deny pattern, which replaces the base's list."""
    (tmp_path / "base.toml").write_text(BASE)
    found = lint_text(
        tmp_path,
        'version = 1\nextends = ["base.toml"]\n[agents.build.write]\ndeny = ["*.pem"]\n',
        "team.toml",
    )
    hits = [f for f in found if f.code == "GL301"]
    assert len(hits) == 1
    assert hits[0].file.endswith("team.toml") and hits[0].line == 4
    assert "secrets/**" in hits[0].message


def test_child_reallowing_denied_tool(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text(BASE)
    found = lint_text(
        tmp_path,
        'version = 1\nextends = ["base.toml"]\n[agents.build.tools]\nwebfetch = "allow"\n',
        "team.toml",
    )
    assert [(f.code, f.line) for f in found] == [("GL301", 4)]


def test_child_loosening_a_denied_default(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text(BASE + '[agents.build.exec]\ndefault = "deny"\n')
    found = lint_text(
        tmp_path,
        'version = 1\nextends = ["base.toml"]\n[agents.build.exec]\ndefault = "allow"\n',
        "team.toml",
    )
    assert "GL301" in codes(found)


def test_child_that_keeps_the_parents_denies_is_clean(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text(BASE)
    found = lint_text(
        tmp_path,
        'version = 1\nextends = ["base.toml"]\n[agents.build.write]\n'
        'deny = ["secrets/**", "*.pem"]\n[agents.build.tools]\nbash = "ask"\n',
        "team.toml",
    )
    assert found == []


def test_extending_the_builtin_default_is_clean(tmp_path: Path) -> None:
    found = lint_text(
        tmp_path,
        'version = 1\nextends = ["builtin:default"]\n[agents.plan.tools]\nwebfetch = "deny"\n',
    )
    assert found == []
