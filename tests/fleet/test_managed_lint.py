"""GL401: rules of a policy that the managed layer overrides (so they do nothing)."""

from __future__ import annotations

from pathlib import Path

from guard.lint import lint_paths

from .conftest import Managed

MANAGED = """\
version = 1

[managed]
pin = ["protected", "confine", "audit"]

[managed.all.write]
deny = ["secrets/"]

[managed.all.tools]
webfetch = "deny"
"""

PROJECT = """\
version = 1
extends = ["builtin:default"]

[agents.build]
mode = "build"
default = "ask"
protected = false
tools = { webfetch = "allow" }

[agents.build.write]
allow = ["secrets/**", "src/**"]

[agents.plan.sandbox]
confine = false

[audit]
syslog = "udp://127.0.0.1:514"
"""


def test_rules_the_managed_layer_overrides_are_flagged(managed: Managed, tmp_path: Path) -> None:
    managed.write("10-org.toml", MANAGED)
    policy = tmp_path / "policy.toml"
    policy.write_text(PROJECT)
    found = [(f.line, f.message) for f in lint_paths([str(policy)]).findings
             if f.code == "GL401"]
    text = "\n".join(m for _, m in found)
    assert "agents.build.write.allow[0] 'secrets/**' has no effect" in text
    assert "10-org.toml:7: managed.all.write.deny[0]" in text
    assert "'src/**'" not in text  # the managed layer says nothing about src/
    assert "agents.build.tools.webfetch = 'allow' has no effect" in text
    assert "agents.build.protected = false has no effect" in text
    assert "agents.plan.sandbox.confine = false has no effect" in text
    assert "[audit] has no effect" in text
    lines = dict((m.split(" ")[0], line) for line, m in found)
    assert lines["agents.build.write.allow[0]"] == 11  # located at the pattern's line


def test_without_a_managed_layer_nothing_is_flagged(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(PROJECT)
    assert not [f for f in lint_paths([str(policy)]).findings if f.code == "GL401"]
