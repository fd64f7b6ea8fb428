"""Policy files: validation, located errors, extends, discovery, the schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guard import Guard, PolicyError, load_policy
from guard.policy import builtin_names, json_schema


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


MINIMAL = """version = 1
[agents.a]
mode = "plan"
default = "deny"
[agents.a.write]
allow = ["{plans}/*.md"]
"""


def test_builtin_policies_load_and_ship_with_the_package() -> None:
    assert {"default", "readonly"} <= set(builtin_names())
    assert set(load_policy("builtin:default").model.agents) == {"plan", "build"}
    assert load_policy("builtin:readonly").model.agents["readonly"].mode == "plan"


def test_unknown_key_is_reported_with_file_line_and_key_path(tmp_path: Path) -> None:
    f = write(tmp_path / "p.toml", MINIMAL + 'denny = ["x"]\n')
    with pytest.raises(PolicyError) as exc:
        load_policy(f)
    (line,) = exc.value.problems
    assert line.startswith(f"{f}:7: agents.a.write.denny: unknown key 'denny'")
    assert "allowed here: deny, ask, allow, default" in line


def test_bad_value_points_at_the_list_item(tmp_path: Path) -> None:
    f = write(
        tmp_path / "p.toml",
        'version = 1\n[agents.a]\nmode = "plan"\ndefault = "deny"\n[agents.a.write]\n'
        'deny = [\n  "a",\n  "b",\n  "{nowhere}/x",\n]\n',
    )
    with pytest.raises(PolicyError) as exc:
        load_policy(f)
    (line,) = exc.value.problems
    assert line.startswith(f"{f}:9: agents.a.write.deny[2]: unknown root {{nowhere}}")


def test_every_problem_gets_its_own_line(tmp_path: Path) -> None:
    f = write(
        tmp_path / "p.toml",
        'version = 1\n[agents.a]\nmode = "planning"\n'
        '[agents.b]\nmode = "build"\ndefault = "maybe"\n',
    )
    with pytest.raises(PolicyError) as exc:
        load_policy(f)
    text = "\n".join(exc.value.problems)
    assert len(exc.value.problems) == 3, text
    assert f"{f}:3: agents.a.mode: input should be 'plan' or 'build'" in text
    assert f"{f}:2: agents.a.default: required key is missing" in text
    assert f"{f}:6: agents.b.default:" in text


def test_toml_syntax_error_has_its_line(tmp_path: Path) -> None:
    f = write(tmp_path / "p.toml", 'version = 1\n[agents.a]\nmode = "plan\n')
    with pytest.raises(PolicyError) as exc:
        load_policy(f)
    assert exc.value.problems[0].startswith(f"{f}:3: invalid TOML:")


def test_missing_version_says_how_to_fix(tmp_path: Path) -> None:
    f = write(tmp_path / "p.toml", "[agents]\n")
    with pytest.raises(PolicyError, match=r"version: missing; add `version = 1`"):
        load_policy(f)


def test_json_policies_are_accepted(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text(
        json.dumps(
            {
                "version": 1,
                "agents": {"a": {"mode": "build", "default": "allow", "tools": {"*": "ask"}}},
            }
        )
    )
    assert load_policy(f).model.agents["a"].tools == {"*": "ask"}


def test_json_error_is_located(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text('{\n "version": 1,\n "agents": {"a": {"mode": "plan", "default": "nope"}}\n}\n')
    with pytest.raises(PolicyError) as exc:
        load_policy(f)
    assert exc.value.problems[0].startswith(f"{f}:3: agents.a.default:")


def test_extends_composes_and_later_wins_per_key(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "team.toml", MINIMAL)
    child = write(
        tmp_path / "child.toml",
        'version = 1\nextends = ["sub/team.toml"]\n[agents.a]\ndefault = "ask"\n',
    )
    loaded = load_policy(child)
    a = loaded.model.agents["a"]
    assert a.mode == "plan" and a.default == "ask"
    assert a.write.allow == ["{plans}/*.md"]
    assert loaded.files == [str(tmp_path / "sub" / "team.toml"), str(child)]


def test_extends_builtin_and_errors_name_the_file_that_wrote_them(tmp_path: Path) -> None:
    child = write(
        tmp_path / "child.toml",
        'version = 1\nextends = "builtin:default"\n\n[agents.plan.write]\nallow = ["{bogus}/x"]\n',
    )
    with pytest.raises(PolicyError) as exc:
        load_policy(child)
    assert exc.value.problems == [
        f"{child}:5: agents.plan.write.allow[0]: unknown root {{bogus}} in '{{bogus}}/x'; use one"
        " of {worktree}, {plans}, {data}, {home}, {tmp} or //absolute/path"
    ]


def test_extends_cycle_and_missing_file_are_clear(tmp_path: Path) -> None:
    write(tmp_path / "a.toml", 'version = 1\nextends = ["b.toml"]\n')
    write(tmp_path / "b.toml", 'version = 1\nextends = ["a.toml"]\n')
    with pytest.raises(PolicyError, match="extends: cycle"):
        load_policy(tmp_path / "a.toml")
    write(tmp_path / "c.toml", 'version = 1\nextends = ["nope.toml"]\n')
    with pytest.raises(PolicyError, match=r"c.toml:2: extends\[0\]: policy file .*nope.toml"):
        load_policy(tmp_path / "c.toml")
    with pytest.raises(PolicyError, match="no built-in policy 'nope'"):
        load_policy("builtin:nope")


def test_discovery_order(repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert Guard.load(worktree=repo).loaded.name == "builtin:default"
    local = write(repo / ".openoxide" / "policy.toml", MINIMAL)
    g = Guard.load(worktree=repo)
    assert g.loaded.name == str(local) and "policy.toml" in g.discovery
    env = write(tmp_path / "env.toml", MINIMAL.replace("agents.a", "agents.e"))
    monkeypatch.setenv("GUARD_POLICY", str(env))
    assert Guard.load(worktree=repo).agent_names == ["e"]
    assert Guard.load("builtin:readonly", worktree=repo).agent_names == ["readonly"]


def test_json_schema_describes_policy_files() -> None:
    schema = json_schema()
    assert schema["title"] == "OpenOxide Guard policy"
    props = schema["properties"]
    assert isinstance(props, dict) and {"version", "extends", "agents"} <= set(props)
    text = json.dumps(schema)
    assert "KindRules" in text and "additionalProperties" in text
