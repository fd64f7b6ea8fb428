"""The cache of validated policies (guard/policy/valid.py): a policy pydantic has not
accepted in exactly this form is never served from it.

The attacks: edit a policy (or a file it extends) after guard has loaded it once and
hope the old, validated form is still used; reorder agents so that another one is
"the plan agent"; upgrade the schema and hope an entry validated under the old one
passes; write a forged or broken entry and hope it is trusted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from guard.decide import Guard
from guard.effects import Effect, EffectKind
from guard.policy import PolicyError, builtin_names, load_policy, valid
from guard.policy.schema import AgentPolicy, KindRules, PolicyFile, SandboxRules

REPO = Path(__file__).resolve().parents[1]

POLICY = """version = 1
[agents.plan]
mode = "plan"
default = "deny"
[agents.plan.write]
deny = ["{deny}"]
allow = ["docs/**"]
"""


def entries() -> list[Path]:
    d = valid.cache_dir()
    return sorted(d.glob("*.json")) if d.is_dir() else []


@pytest.fixture(autouse=True)
def _fresh_fingerprint(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fresh fingerprint, and loads that store (as ``guard run``'s do)."""
    monkeypatch.setattr(valid, "_fingerprint", None)
    with valid.storing():
        yield


def test_the_validated_form_has_exactly_the_schema_fields() -> None:
    """A field added to the pydantic schema but not to the cached form would be dropped."""
    pairs = [(valid.Policy, PolicyFile), (valid.Agent, AgentPolicy), (valid.Rules, KindRules),
             (valid.Sandbox, SandboxRules)]
    for plain, model in pairs:
        assert list(plain.__match_args__) == list(model.model_fields), plain


@pytest.mark.parametrize("spec", [*(f"builtin:{n}" for n in builtin_names()),
                                  *(str(p) for p in sorted((REPO / "policies").glob("*.toml")))])
def test_a_cached_load_gives_what_pydantic_gave(spec: str) -> None:
    assert entries() == []
    cold = load_policy(spec)
    assert len(entries()) == 1
    hot = load_policy(spec)
    assert hot.model == cold.model
    # and the cold form is pydantic's own model, field for field
    from guard.policy.schema import PolicyFile as Model

    from_pydantic = valid.from_dump(Model.model_validate(_merged(spec)).model_dump(mode="json"))
    assert cold.model == from_pydantic
    for name, agent in cold.model.agents.items():
        assert agent.mode in ("plan", "build"), name


def _merged(spec: str) -> dict[str, object]:
    from guard.policy import loader

    merged: dict[str, object] = {}
    loader._load_into(spec, None, "policy", merged, {}, {}, [], [], [], [], [])  # type: ignore[arg-type]
    merged.pop("extends", None)
    merged["version"] = 1
    return merged


def test_an_edited_policy_is_validated_again(tmp_path: Path) -> None:
    """Attack: the policy is loaded (and cached), then edited: the edit must take effect,
    and an edit that makes it invalid must be an error, not the old validated form."""
    f = tmp_path / "policy.toml"
    f.write_text(POLICY.format(deny="src/**"))
    g = Guard.load(policy=f, worktree=tmp_path)
    assert not g.decide("plan", [Effect(EffectKind.WRITE, str(tmp_path / "src/a.py"))]).allowed
    f.write_text(POLICY.format(deny="lib/**"))
    g = Guard.load(policy=f, worktree=tmp_path)
    assert g.agent("plan").write.deny == ["lib/**"]
    assert len(entries()) == 2
    bad = POLICY.format(deny="src/**").replace('mode = "plan"', 'mode = "plan"\nwritable = 1')
    f.write_text(bad)
    with pytest.raises(PolicyError, match="writable"):
        load_policy(str(f))
    f.write_text(POLICY.format(deny="src/**").replace('"deny"', '"maybe"', 1))
    with pytest.raises(PolicyError):
        load_policy(str(f))


def test_an_edited_parent_in_the_extends_chain_is_validated_again(tmp_path: Path) -> None:
    parent = tmp_path / "base.toml"
    child = tmp_path / "policy.toml"
    parent.write_text(POLICY.format(deny="src/**"))
    child.write_text('version = 1\nextends = ["base.toml"]\n[agents.plan]\ndefault = "ask"\n')
    assert load_policy(str(child)).model.agents["plan"].write.deny == ["src/**"]
    parent.write_text(POLICY.format(deny="etc/**"))
    assert load_policy(str(child)).model.agents["plan"].write.deny == ["etc/**"]
    typo = POLICY.format(deny="etc/**").replace("[agents.plan.write]", "[agents.plan.wirte]")
    parent.write_text(typo)
    with pytest.raises(PolicyError, match="wirte"):
        load_policy(str(child))


def test_the_order_of_agents_is_part_of_the_key(tmp_path: Path) -> None:
    """The first plan agent listed is the one ``guard run`` picks without ``--agent plan``:
    two policies that differ only in the order of their agents are two entries."""
    one = 'version = 1\n[agents.a]\nmode = "plan"\ndefault = "deny"\n'
    two = 'version = 1\n[agents.b]\nmode = "plan"\ndefault = "ask"\n'
    f = tmp_path / "policy.toml"
    f.write_text(one + two.replace("version = 1\n", ""))
    assert list(load_policy(str(f)).model.agents) == ["a", "b"]
    f.write_text(two + one.replace("version = 1\n", ""))
    assert list(load_policy(str(f)).model.agents) == ["b", "a"]
    assert list(load_policy(str(f)).model.agents) == ["b", "a"]  # from the cache now


def _forge(path: Path, agent_default: str) -> None:
    doc = json.loads(path.read_text())
    doc["policy"]["agents"]["plan"]["default"] = agent_default
    doc["policy"]["agents"]["plan"]["write"]["deny"] = []
    path.write_text(json.dumps(doc))


def test_a_changed_validator_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack: an entry made under another schema (here: forged, to show it would be
    used) must not serve once the validator changed."""
    f = tmp_path / "policy.toml"
    f.write_text(POLICY.format(deny="src/**"))
    load_policy(str(f))
    [entry] = entries()
    _forge(entry, "allow")
    assert load_policy(str(f)).model.agents["plan"].default == "allow"  # the cache is used
    monkeypatch.setattr(valid, "_fingerprint", b"another schema")
    fresh = load_policy(str(f)).model.agents["plan"]
    assert fresh.default == "deny" and fresh.write.deny == ["src/**"]


def test_the_fingerprint_covers_the_schema_and_pydantic(tmp_path: Path) -> None:
    files = valid.validator_files()
    names = [(p.parent.name, p.name) for p in files]
    assert ("policy", "schema.py") in names and ("policy", "valid.py") in names
    assert ("pydantic", "version.py") in names
    copies = []
    for i, p in enumerate(files):
        c = tmp_path / f"{i}-{p.name}"
        c.write_bytes(p.read_bytes())
        copies.append(c)
    before = valid.fingerprint_of(copies)
    assert valid.fingerprint_of(copies) == before
    for c in copies:
        text = c.read_bytes()
        c.write_bytes(text + b"\n# changed\n")
        assert valid.fingerprint_of(copies) != before, c.name
        c.write_bytes(text)


@pytest.mark.parametrize("damage", ["garbage", "other key", "extra field", "missing field",
                                    "bad action", "bad mode", "not a list"])
def test_a_broken_or_misplaced_entry_is_never_trusted(tmp_path: Path, damage: str) -> None:
    f = tmp_path / "policy.toml"
    f.write_text(POLICY.format(deny="src/**"))
    want = load_policy(str(f)).model
    [entry] = entries()
    doc = json.loads(entry.read_text())
    plan = doc["policy"]["agents"]["plan"]
    if damage == "garbage":
        entry.write_bytes(b"\x00{not json")
    else:
        if damage == "other key":
            doc["key"] = "0" * 64
        elif damage == "extra field":
            plan["write"]["also"] = ["x"]
        elif damage == "missing field":
            del plan["protected"]
        elif damage == "bad action":
            plan["default"] = "maybe"
        elif damage == "bad mode":
            plan["mode"] = "yolo"
        elif damage == "not a list":
            plan["write"]["deny"] = "src/**"
        plan["write"]["allow"] = ["**"]  # what a forger would want
        entry.write_text(json.dumps(doc))
    assert load_policy(str(f)).model == want


def test_the_cache_is_a_protected_path(tmp_path: Path) -> None:
    """No agent (plan or build) may write the cache: it is under guard's data directory."""
    g = Guard.load(worktree=tmp_path)
    target = str(valid.cache_dir() / ("0" * 64 + ".json"))
    for agent in (g.plan_agent_name, g.build_agent_name):
        assert agent is not None
        for kind in (EffectKind.WRITE, EffectKind.DELETE):
            d = g.decide(agent, [Effect(kind, target)])
            assert not d.allowed, (agent, kind, d)


def test_a_policy_seen_by_guard_run_loads_without_pydantic(tmp_path: Path) -> None:
    """What keeps ``guard run`` quick: once a ``guard run`` has loaded a policy, the next
    load of it needs no pydantic."""
    env = dict(os.environ)
    code = (
        "import sys; from guard.decide import Guard; Guard.load(worktree=sys.argv[1]);"
        " print('pydantic' in sys.modules)"
    )

    def load() -> str:
        return subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, text=True,
                              capture_output=True, check=True).stdout.strip()

    assert load() == "True"
    assert entries() == []  # an ordinary load reads the cache but never writes it
    run = subprocess.run([sys.executable, "-m", "guard", "run", "--no-monitor", "-q", "--",
                          "true"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert len(entries()) == 1
    assert load() == "False"


def test_loads_outside_guard_run_write_nothing(tmp_path: Path) -> None:
    """Read-only commands (``guard replay``, ``guard check``) leave the data directory as
    it was: only ``guard run`` (inside ``valid.storing()``) keeps validated policies."""
    f = tmp_path / "policy.toml"
    f.write_text(POLICY.format(deny="src/**"))
    token = valid._STORING.set(False)
    try:
        load_policy(str(f))
    finally:
        valid._STORING.reset(token)
    assert entries() == []


def toml_entries() -> list[Path]:
    d = valid.toml_dir()
    return sorted(d.glob("*.json")) if d.is_dir() else []


def test_a_policy_text_seen_by_guard_run_loads_without_tomllib(tmp_path: Path) -> None:
    """The parsed text is kept too: the next load of the same text needs no TOML parser,
    and gives what tomllib gave."""
    f = tmp_path / "policy.toml"
    f.write_text(POLICY.format(deny="src/**"))
    cold = load_policy(str(f))
    assert len(toml_entries()) == 1
    code = ("import sys; from guard.policy import load_policy; m = load_policy(sys.argv[1]);"
            " print('tomllib' in sys.modules, sorted(m.model.agents))")
    out = subprocess.run([sys.executable, "-c", code, str(f)], env=dict(os.environ), text=True,
                         capture_output=True, check=True).stdout.split(maxsplit=1)
    assert out == ["False", "['plan']\n"]
    assert load_policy(str(f)).model == cold.model


def test_an_edited_text_is_parsed_again(tmp_path: Path) -> None:
    """Edit one character after the text was kept: the edit is what is in force."""
    f = tmp_path / "policy.toml"
    f.write_text(POLICY.format(deny="src/**"))
    load_policy(str(f))
    f.write_text(POLICY.format(deny="srx/**"))
    assert load_policy(str(f)).model.agents["plan"].write.deny == ["srx/**"]
    assert len(toml_entries()) == 2


@pytest.mark.parametrize("damage", ["garbage", "other-text", "not-a-table", "extra-key"])
def test_a_broken_or_misplaced_parsed_text_is_never_trusted(tmp_path: Path, damage: str) -> None:
    """An entry that is not exactly the one for this text (another text's, moved under
    this one's name) is a miss: tomllib parses again."""
    f = tmp_path / "policy.toml"
    other = POLICY.format(deny="other/**")
    f.write_text(other)
    load_policy(str(f))
    (moved,) = toml_entries()
    f.write_text(POLICY.format(deny="src/**"))
    load_policy(str(f))
    entry = next(e for e in toml_entries() if e != moved)
    doc = json.loads(entry.read_text())
    if damage == "garbage":
        entry.write_text("{not json")
    elif damage == "other-text":
        entry.write_text(moved.read_text())
    elif damage == "not-a-table":
        entry.write_text(json.dumps({"toml": doc["toml"], "data": [1]}))
    else:
        entry.write_text(json.dumps({**doc, "extra": 1}))
    for e in entries():  # validated forms too: the parse is what decides the merged input
        e.unlink()
    assert load_policy(str(f)).model.agents["plan"].write.deny == ["src/**"]


@pytest.mark.parametrize("value", ["1979-05-27", "inf", "nan"])
def test_what_json_cannot_carry_exactly_is_not_kept(tmp_path: Path, value: str) -> None:
    import tomllib

    text = f"version = 1\nx = {value}\n"
    valid.store_toml(text, tomllib.loads(text))
    assert toml_entries() == []
    assert valid.parsed_toml(text) is None


def test_the_parsed_texts_are_a_protected_path(tmp_path: Path) -> None:
    g = Guard.load(worktree=tmp_path)
    target = str(valid.toml_dir() / ("0" * 64 + ".json"))
    for agent in (g.plan_agent_name, g.build_agent_name):
        assert agent is not None
        for kind in (EffectKind.WRITE, EffectKind.DELETE):
            assert not g.decide(agent, [Effect(kind, target)]).allowed, (agent, kind)
