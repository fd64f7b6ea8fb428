"""The evaluator: list precedence, canonicalization attacks, fail-closed behaviour."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from guard import Action, Effect, Guard
from guard.decide import PROTECTED_PATTERNS

POLICY = """version = 1
[agents.t]
mode = "build"
default = "allow"
[agents.t.write]
deny = ["secret/", "!secret/ok.txt"]
ask = ["*.lock"]
allow = ["**", "!vendor/**"]
default = "deny"
"""


@pytest.fixture
def g(repo: Path) -> Guard:
    (repo / "policy.toml").write_text(POLICY)
    return Guard.load(repo / "policy.toml", worktree=repo)


@pytest.mark.parametrize(
    ("path", "action", "rule_part"),
    [
        ("src/a.py", Action.ALLOW, "agents.t.write.allow[0] '**'"),
        ("secret/key", Action.DENY, "agents.t.write.deny[0] 'secret/'"),
        ("secret/ok.txt", Action.ALLOW, "agents.t.write.allow[0]"),  # exception inside deny
        ("Cargo.lock", Action.ASK, "agents.t.write.ask[0] '*.lock'"),
        ("secret/x.lock", Action.DENY, "deny[0]"),  # deny > ask
        ("vendor/lib.py", Action.DENY, "agents.t.write.default"),  # allow exception -> default
    ],
)
def test_deny_beats_ask_beats_allow_beats_default(
    g: Guard, path: str, action: Action, rule_part: str
) -> None:
    d = g.decide_effect("t", Effect.write(path))
    assert d.action is action, d
    assert rule_part in d.rule


def test_rule_names_file_line_agent_kind_list_index_and_pattern(g: Guard, repo: Path) -> None:
    d = g.decide_effect("t", Effect.write("Cargo.lock"))
    assert d.rule == f"{repo / 'policy.toml'}:7: agents.t.write.ask[0] '*.lock'"


def test_plan_agent_writes_only_plan_files(repo: Path) -> None:
    g = Guard.load(worktree=repo)
    assert g.decide("plan", [Effect.write(".openoxide/plans/p.md")]).action is Action.ALLOW
    for path in ["src/app.py", "new.py", ".openoxide/plans/p.txt", ".openoxide/plans/sub/p.md"]:
        assert g.decide("plan", [Effect.write(path)]).action is Action.DENY, path
    assert g.decide("plan", [Effect.read("src/app.py")]).action is Action.ALLOW
    assert g.decide("plan", [Effect.read(".env.local")]).action is Action.ASK
    assert g.decide("plan", [Effect.read("certs/server.pem")]).action is Action.ASK


def test_plan_agent_cannot_write_through_symlink_planted_in_plan_dir(repo: Path) -> None:
    """Attack: a plan-looking name that is a symlink to source code."""
    os.symlink("../../src/app.py", repo / ".openoxide/plans/innocent.md")
    d = Guard.load(worktree=repo).decide("plan", [Effect.write(".openoxide/plans/innocent.md")])
    assert d.action is Action.DENY
    assert "symlink" in d.reason and "src/app.py" in d.reason


def test_plan_agent_cannot_write_through_symlinked_directory(repo: Path) -> None:
    """Attack: a directory symlink inside the plan dir pointing at src/."""
    os.symlink("../../src", repo / ".openoxide/plans/src.md")
    g = Guard.load(worktree=repo)
    assert g.decide("plan", [Effect.write(".openoxide/plans/src.md/app.py")]).action is Action.DENY
    assert g.decide("plan", [Effect.write(".openoxide/plans/src.md/new.md")]).action is Action.DENY


def test_link_outside_pointing_into_plans_is_denied_too(repo: Path) -> None:
    """Both the link and its target are checked: the link's own location is denied."""
    os.symlink("../.openoxide/plans/p.md", repo / "src" / "p.md")
    g = Guard.load(worktree=repo)
    assert g.decide("plan", [Effect.write("src/p.md")]).action is Action.DENY
    # the build agent may write both places
    assert g.decide("build", [Effect.write("src/p.md")]).action is Action.ALLOW


def test_dangling_symlink_resolves_to_its_target(repo: Path) -> None:
    """Attack: a dangling link in the plan dir; writing it creates src/evil.py."""
    os.symlink("../../src/evil.py", repo / ".openoxide/plans/evil.md")
    d = Guard.load(worktree=repo).decide("plan", [Effect.write(".openoxide/plans/evil.md")])
    assert d.action is Action.DENY and "src/evil.py" in d.reason


@pytest.mark.parametrize(
    "path",
    [
        ".openoxide/plans/../../src/app.py",
        ".openoxide/plans/../../../outside.md",
        "../repo/src/app.py",
        "./.openoxide/plans/./../policy.toml",
        "src/../.openoxide/plans/../plans/../../src/x.md",
    ],
)
def test_dotdot_escapes_are_resolved_before_matching(repo: Path, path: str) -> None:
    assert Guard.load(worktree=repo).decide("plan", [Effect.write(path)]).action is Action.DENY


def test_relative_paths_resolve_against_the_calls_cwd(repo: Path) -> None:
    g = Guard.load(worktree=repo)
    plans = repo / ".openoxide" / "plans"
    assert g.decide("plan", [Effect.write("p.md")], cwd=plans).action is Action.ALLOW
    assert g.decide("plan", [Effect.write("p.md")], cwd=repo / "src").action is Action.DENY


def test_home_is_expanded(repo: Path) -> None:
    g = Guard.load(worktree=repo)
    d = g.decide("build", [Effect.write("~/.bashrc")])
    assert d.action is Action.DENY and "protected" in d.reason


def test_nonexistent_file_resolves_through_nearest_existing_ancestor(repo: Path) -> None:
    """Attack: a symlinked directory with a not-yet-existing tail."""
    os.symlink(repo / "src", repo / ".openoxide/plans/d")
    d = Guard.load(worktree=repo).decide("plan", [Effect.write(".openoxide/plans/d/x/y/z.md")])
    assert d.action is Action.DENY and "src/x/y/z.md" in d.reason


@pytest.mark.parametrize("bad", ["a\x00b", "plans/\x1b[31m.md", "x\ny", "\x7f"])
def test_control_characters_are_a_clear_deny(repo: Path, bad: str) -> None:
    d = Guard.load(worktree=repo).decide("build", [Effect.write(bad)])
    assert d.action is Action.DENY
    assert "control character" in d.reason and d.rule == "guard.error"


def test_any_exception_while_deciding_is_a_deny(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import guard.decide as decide_mod

    def boom(path: str, cwd: str, write: bool = False) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(decide_mod, "canonicalize", boom)
    d = Guard.load(worktree=repo).decide("build", [Effect.write("src/a.py")])
    assert d.action is Action.DENY
    assert "RuntimeError: disk on fire" in d.reason and "fail closed" in d.reason


def test_unknown_agent_and_empty_effects_deny(repo: Path) -> None:
    g = Guard.load(worktree=repo)
    d = g.decide("nobody", [Effect.read("src/app.py")])
    assert d.action is Action.DENY and "no agent 'nobody'" in d.reason
    assert g.decide("plan", []).action is Action.DENY


def test_symlink_loop_is_a_deny(repo: Path) -> None:
    os.symlink("loop-b", repo / "loop-a")
    os.symlink("loop-a", repo / "loop-b")
    d = Guard.load(worktree=repo).decide("build", [Effect.write("loop-a")])
    assert d.action is Action.DENY and "loop" in d.reason


def test_plan_agent_cannot_write_a_hard_linked_plan_file(repo: Path) -> None:
    """Attack: a plan file hard-linked to a source file writes the source file."""
    os.link(repo / "src" / "app.py", repo / ".openoxide/plans/linked.md")
    d = Guard.load(worktree=repo).decide("plan", [Effect.write(".openoxide/plans/linked.md")])
    assert d.action is Action.DENY and "hard links" in d.reason


@pytest.mark.parametrize(
    "path",
    [
        ".openoxide/policy.toml",
        ".openoxide/sessions/s.json",
        ".git/hooks/pre-commit",
        ".git/config",
        ".claude/settings.json",
        ".claude/settings.local.json",
        ".codex/hooks.json",
        ".gemini/settings.json",
        ".cursor/hooks.json",
        "~/.bashrc",
        "~/.zshrc",
        "~/.ssh/authorized_keys",
        "~/.claude/settings.json",
    ],
)
@pytest.mark.parametrize("agent", ["plan", "build"])
def test_protected_paths_are_denied_for_every_shipped_agent(
    repo: Path, agent: str, path: str
) -> None:
    g = Guard.load(worktree=repo)
    for effect in (Effect.write(path), Effect.delete(path)):
        d = g.decide(agent, [effect])
        assert d.action is Action.DENY, (agent, path, d)
        assert "protected" in d.reason


def test_guard_data_dir_and_the_loaded_policy_file_are_protected(
    repo: Path, tmp_path: Path
) -> None:
    pol = tmp_path / "elsewhere" / "policy.toml"
    pol.parent.mkdir()
    pol.write_text('version = 1\nextends = ["builtin:default"]\n')
    g = Guard.load(pol, worktree=repo)
    assert g.decide("build", [Effect.write(str(pol))]).action is Action.DENY
    audit = g.roots.data / "audit" / "log.jsonl"
    assert g.decide("build", [Effect.write(str(audit))]).action is Action.DENY


def test_protected_can_be_turned_off_explicitly(repo: Path) -> None:
    (repo / "p.toml").write_text(
        'version = 1\n[agents.x]\nmode = "build"\ndefault = "allow"\nprotected = false\n'
    )
    g = Guard.load(repo / "p.toml", worktree=repo)
    assert g.decide("x", [Effect.write(".git/config")]).action is Action.ALLOW
    assert len(PROTECTED_PATTERNS) > 10


def test_plan_dir_fallback_without_version_control(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    g = Guard.load(cwd=plain)
    assert g.roots.worktree is None
    assert str(g.roots.plans).startswith(str(g.roots.data))
    target = g.roots.plans / "p.md"
    assert g.decide("plan", [Effect.write(str(target))], cwd=plain).action is Action.ALLOW
    assert g.decide("plan", [Effect.write("notes.md")], cwd=plain).action is Action.DENY
    # guard's own data dir stays protected around the fallback plans
    sessions = g.roots.data / "sessions" / "x.json"
    assert g.decide("build", [Effect.write(str(sessions))], cwd=plain).action is Action.DENY


def test_tools_table_exact_then_star_then_default(repo: Path) -> None:
    g = Guard.load(worktree=repo)
    assert g.decide("plan", [Effect.tool("update_plan")]).action is Action.DENY
    assert g.decide("plan", [Effect.tool("plan_exit")]).action is Action.ALLOW
    assert g.decide("plan", [Effect.tool("mcp__x__y")]).action is Action.DENY
    assert g.decide("build", [Effect.tool("request_user_input")]).action is Action.DENY
    assert g.decide("build", [Effect.tool("update_plan")]).action is Action.ALLOW


def test_subagents_inherit_only_if_listed(repo: Path) -> None:
    g = Guard.load(worktree=repo)
    assert g.decide("plan", [Effect.tool("task"), Effect.tool("task:Explore")]).allowed
    d = g.decide("plan", [Effect.tool("task"), Effect.tool("task:build")])
    assert d.action is Action.DENY and "subagents" in d.reason


def test_strictest_effect_wins_and_is_reported(repo: Path) -> None:
    g = Guard.load(worktree=repo)
    d = g.decide(
        "plan",
        [Effect.tool("bash"), Effect.read("src/app.py"), Effect.write("src/app.py")],
    )
    assert d.action is Action.DENY and d.effect == Effect.write("src/app.py")


def test_unknown_targets_use_the_kind_default(repo: Path) -> None:
    g = Guard.load(worktree=repo)
    assert g.decide("plan", [Effect.write(None, "redirect to $OUT")]).action is Action.DENY
    assert g.decide("plan", [Effect.exec(None, "python -c ...")]).action is Action.ASK


def test_network_hosts_match_patterns(repo: Path) -> None:
    (repo / "p.toml").write_text(
        'version = 1\n[agents.n]\nmode = "build"\ndefault = "deny"\n'
        '[agents.n.network]\nallow = ["*.github.com", "pypi.org"]\n'
    )
    g = Guard.load(repo / "p.toml", worktree=repo)
    assert g.decide("n", [Effect.network("api.github.com")]).allowed
    assert g.decide("n", [Effect.network("PyPI.org.")]).allowed
    assert not g.decide("n", [Effect.network("evil.com")]).allowed


def test_decisions_are_memoized_but_follow_the_filesystem(repo: Path) -> None:
    """Memoization is keyed on the canonical path: a new symlink changes the answer."""
    g = Guard.load(worktree=repo)
    target = ".openoxide/plans/p.md"
    assert g.decide("plan", [Effect.write(target)]).allowed
    os.symlink("../../src/app.py", repo / target)
    assert g.decide("plan", [Effect.write(target)]).action is Action.DENY


# -- Guard.load_shared: a long-lived process (hookd) reuses the compiled policy -------


def _agent_policy(default: str) -> str:
    return f'version = 1\n[agents.t]\nmode = "build"\ndefault = "{default}"\n'


def test_shared_guard_is_reused_while_nothing_changed(repo: Path) -> None:
    (repo / "p.toml").write_text(_agent_policy("allow"))
    first = Guard.load_shared(repo / "p.toml", cwd=repo)
    assert Guard.load_shared(repo / "p.toml", cwd=repo) is first
    assert Guard.load_shared(repo / "p.toml", cwd=repo / "src") is first  # same roots


def test_attack_policy_edit_that_keeps_size_and_times_is_seen_at_once(repo: Path) -> None:
    """A policy rewritten in place to the same length, its mtime put back with utime (and
    within the same clock tick as the first load): the next decision uses the new text."""
    pol = repo / "p.toml"
    pol.write_text(_agent_policy("allow"))
    st = pol.stat()
    assert Guard.load_shared(pol, cwd=repo).decide("t", [Effect.write("a")]).action is Action.ALLOW
    with open(pol, "r+") as fh:
        fh.write(_agent_policy("deny "))  # same length: "allow" -> "deny "
    os.utime(pol, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert pol.stat().st_size == st.st_size
    with pytest.raises(Exception, match="deny "):  # the new text is read (and is invalid)
        Guard.load_shared(pol, cwd=repo)
    pol.write_text(_agent_policy("deny"))
    assert Guard.load_shared(pol, cwd=repo).decide("t", [Effect.write("a")]).action is Action.DENY


def test_attack_extends_parent_swapped_through_a_symlink_is_seen(
    repo: Path, tmp_path: Path
) -> None:
    """The policy's ``extends`` names a file through a symlinked directory; retargeting the
    link (texts of the top file unchanged) changes what the chain resolves to."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "base.toml").write_text(_agent_policy("allow"))
    (b / "base.toml").write_text(_agent_policy("deny"))
    (tmp_path / "cur").symlink_to(a)
    top = repo / "p.toml"
    top.write_text(f'version = 1\nextends = ["{tmp_path / "cur" / "base.toml"}"]\n')
    g = Guard.load_shared(top, cwd=repo)
    assert g.decide("t", [Effect.write("a")]).action is Action.ALLOW
    (tmp_path / "cur").unlink()
    (tmp_path / "cur").symlink_to(b)
    g2 = Guard.load_shared(top, cwd=repo)
    assert g2 is not g
    assert g2.decide("t", [Effect.write("a")]).action is Action.DENY


def test_worktree_policy_created_after_the_first_call_is_discovered(repo: Path) -> None:
    """Discovery runs for every call: a worktree policy that appears later takes over from
    the built-in default, and its removal brings the default back."""
    g = Guard.load_shared(cwd=repo)
    assert "built-in" in g.discovery
    (repo / ".openoxide").mkdir(exist_ok=True)
    (repo / ".openoxide/policy.toml").write_text(_agent_policy("deny"))
    g2 = Guard.load_shared(cwd=repo)
    assert g2.discovery == "the worktree's .openoxide/policy.toml"
    assert g2.decide("t", [Effect.write("a")]).action is Action.DENY
    (repo / ".openoxide/policy.toml").unlink()
    assert "built-in" in Guard.load_shared(cwd=repo).discovery


def test_a_policy_that_became_unreadable_fails_instead_of_using_the_old_one(repo: Path) -> None:
    pol = repo / "p.toml"
    pol.write_text(_agent_policy("allow"))
    Guard.load_shared(pol, cwd=repo)
    pol.unlink()
    with pytest.raises(Exception, match="does not exist"):
        Guard.load_shared(pol, cwd=repo)


def test_reason_names_the_path_as_roots_describe_does(g: Guard, repo: Path) -> None:
    """The reason's ``{root}/rest`` spelling (one regex over the roots, most specific
    first) equals Roots.describe on each root, inside it, and on a sibling sharing its
    name as a prefix (``repo2`` is not inside ``repo``)."""
    a = g._compiled("t")
    probes = []
    for _, root in g.root_map.items():
        if root is not None:
            probes += [root, root + "/x/y.md", root + "2", root + "2/z", root + "/\n"]
    probes += ["/", "/nowhere/at/all"]
    for path in probes:
        e = Effect.write(path)
        d = g._decide_path(a, e.kind, path, False, e, None)
        assert d.reason.startswith(f"write {g.roots.describe(path)}:"), (path, d.reason)


def test_hot_path_decisions_are_real_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-path decisions are built through Decision's slots (faster than its frozen
    __init__): they must be indistinguishable from Decision(...) -- equal, same hash,
    still frozen -- and a Decision with other fields must get its own constructor back."""
    import dataclasses

    import guard.decisions
    from guard.effects import Decision, EffectKind

    e = Effect(EffectKind.WRITE, "/x")
    made = guard.decisions.new_decision(Action.ALLOW, "why", "rule", e)
    plain = Decision(Action.ALLOW, "why", "rule", e)
    assert type(made) is Decision and made == plain and hash(made) == hash(plain)
    assert repr(made) == repr(plain)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.action = Action.DENY  # type: ignore[misc]

    @dataclasses.dataclass(frozen=True, slots=True)
    class Wider:
        action: Action
        reason: str
        rule: str
        effect: Effect | None = None
        extra: str = ""

    monkeypatch.setattr(guard.decisions, "Decision", Wider)
    assert guard.decisions.decision_maker() is Wider  # type: ignore[comparison-overlap]
