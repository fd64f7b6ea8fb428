"""Network rules: host and port patterns, deny-first, decided like every other kind; the
policy keys of the egress proxy (``network.model_api``, ``[egress] resolve``); the
``egress`` dialect; both matching engines agreeing on network targets."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from engines import require_engine

import guard.match.re2_engine
from guard import Action, Effect, EffectKind, Guard
from guard.analysis import effects_for
from guard.effects import GuardError
from guard.match import PatternError
from guard.network import (
    format_target,
    parse_network_pattern,
    resolve_problem,
    resolve_table,
    split_target,
    target_path,
)
from guard.policy import PolicyError, load_policy

POLICY = """version = 1
[agents.n]
mode = "build"
default = "deny"
[agents.n.network]
deny = ["evil.example.com", "*:25"]
ask = ["*.corp.test"]
allow = ["*.example.com", "!*.example.com:22", "pypi.org:443", "10.*:54[0-9][0-9]",
         "[::1]:8080", "*.corp.test:443"]
model_api = ["api.anthropic.com:443"]
[agents.p]
mode = "plan"
default = "deny"
[agents.p.network]
allow = ["docs.test", "api.anthropic.com:443"]
model_api = ["models.test:443"]
"""


@pytest.fixture
def g(repo: Path) -> Guard:
    (repo / "p.toml").write_text(POLICY)
    return Guard.load(repo / "p.toml", worktree=repo)


def _act(g: Guard, agent: str, target: str | None, **kw: object) -> Action:
    return g.decide_effect(agent, Effect.network(target, **kw)).action  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("target", "action"),
    [
        ("a.example.com", Action.ALLOW),  # any port: the host pattern decides
        ("a.example.com:443", Action.ALLOW),
        ("a.example.com:22", Action.DENY),  # the exception carves port 22 out of the allow
        ("evil.example.com:443", Action.DENY),  # deny before allow
        ("a.example.com:25", Action.DENY),  # a port pattern in deny: every host
        ("pypi.org:443", Action.ALLOW),
        ("pypi.org:80", Action.DENY),  # the rule names port 443 only
        ("pypi.org", Action.DENY),  # port unknown: a port rule does not decide it
        ("10.1.2.3:5432", Action.ALLOW),
        ("10.1.2.3:6379", Action.DENY),
        ("[::1]:8080", Action.ALLOW),
        ("::1", Action.DENY),
        ("x.corp.test:443", Action.ASK),  # ask before allow
        ("PyPI.org.:443", Action.ALLOW),  # case and the root dot do not matter
        ("api.anthropic.com:443", Action.DENY),  # model_api: only under guard run
    ],
)
def test_host_and_port_patterns_are_deny_first_lists(g: Guard, target: str, action: Action) -> None:
    assert _act(g, "n", target) is action


def test_model_api_applies_to_connections_under_guard_run_only(g: Guard) -> None:
    d = g.decide_effect("n", Effect.network("api.anthropic.com:443", via="run"))
    assert d.allowed and "agents.n.network.model_api[0]" in d.rule
    assert "allowed under guard run" in d.reason
    assert _act(g, "n", "api.anthropic.com:443") is Action.DENY
    # deny still wins over model_api
    assert _act(g, "n", "evil.example.com:443", via="run") is Action.DENY


def test_plan_mode_refuses_network_effects_that_change_a_remote(g: Guard) -> None:
    """A request that may change a remote is refused in plan mode even to an allowed
    host (rule guard.plan-network), except through the model API list under guard run;
    in build mode the host rules alone decide."""
    d = g.decide_effect("p", Effect.network("docs.test:80", "POST http://docs.test/x may"
                                                            " change the server",
                                            changes_remote=True))
    assert (d.action, d.rule) == (Action.DENY, "guard.plan-network")
    assert "POST http://docs.test/x" in d.reason and "plan-mode agent" in d.reason
    assert _act(g, "p", "docs.test:80") is Action.ALLOW
    assert _act(g, "p", None, changes_remote=True) is Action.DENY
    # the plan agent's own allow list does not make a POST to the API fine outside run
    assert _act(g, "p", "api.anthropic.com:443", changes_remote=True) is Action.DENY
    assert _act(g, "p", "models.test:443", changes_remote=True, via="run") is Action.ALLOW
    assert _act(g, "n", "a.example.com:80", changes_remote=True) is Action.ALLOW


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("pypi.org", ("pypi.org", None)),
        ("PyPI.org.:443", ("pypi.org", 443)),
        ("[2001:DB8::0001]:443", ("2001:db8::1", 443)),
        ("::1", ("::1", None)),
        ("10.0.0.1:5432", ("10.0.0.1", 5432)),
    ],
)
def test_targets_are_made_canonical(text: str, want: tuple[str, int | None]) -> None:
    assert split_target(text) == want
    assert split_target(format_target(*want)) == want


@pytest.mark.parametrize("bad", ["a.com:0", "a.com:65536", "a.com:08", "a.com:", "a/b",
                                 "a b", "[::1", "[x]:1", "[::1]x", "1:2:3:x", ""])
def test_malformed_targets_are_errors(bad: str) -> None:
    with pytest.raises(GuardError):
        split_target(bad)


def test_a_malformed_target_is_a_deny_with_the_error(g: Guard) -> None:
    d = g.decide_effect("n", Effect.network("a.com:99999"))
    assert d.action is Action.DENY and "expected 1 to 65535" in d.reason


def test_the_matcher_sees_the_host_as_a_directory_and_the_port_as_a_file() -> None:
    assert target_path("pypi.org", 443) == ("//network/pypi.org/443", False)
    assert target_path("pypi.org", None) == ("//network/pypi.org", True)


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("a/b", "'/'"),
        ("{home}", "'{}'"),
        ("//etc", "'/'"),
        ("x:abc", "not a number"),
        ("x:99999", "not in 1..65535"),
        ("x:0443", "not in 1..65535"),
        ("x y", "' '"),
        ("user@host", "'@'"),
        ("[::1", "without ']'"),
        (":443", "names no host"),
    ],
)
def test_malformed_network_patterns_are_clear_errors(pattern: str, problem: str) -> None:
    with pytest.raises(PatternError, match=r"HOST or HOST:PORT|names no host|1\.\.65535") as info:
        parse_network_pattern(pattern)
    assert problem in str(info.value)


def test_a_policy_with_a_bad_network_pattern_or_resolve_entry_does_not_load(
    tmp_path: Path,
) -> None:
    p = tmp_path / "p.toml"
    p.write_text('version = 1\n[agents.a]\nmode = "plan"\ndefault = "deny"\n'
                 '[agents.a.network]\nallow = ["ok.test", "bad/path"]\n'
                 'model_api = ["api.test:https"]\n'
                 '[egress]\nresolve = { "ok.test" = "localhost", "*.x" = "1.2.3.4" }\n')
    with pytest.raises(PolicyError) as info:
        load_policy(p)
    problems = info.value.problems
    assert any(":6: agents.a.network.allow[1]: network pattern 'bad/path'" in x for x in problems)
    assert any("agents.a.network.model_api[0]" in x and "not a number" in x for x in problems)
    assert any("egress.resolve.ok.test" in x and "not an IP address" in x for x in problems)
    assert any("egress.resolve.*.x" in x for x in problems)


def test_unknown_keys_under_network_and_egress_suggest_the_right_one(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_text('version = 1\n[agents.a]\nmode = "plan"\ndefault = "deny"\n'
                 '[agents.a.network]\nmodel_apis = []\n[egress]\nresolver = {}\n')
    with pytest.raises(PolicyError) as info:
        load_policy(p)
    text = str(info.value)
    assert "did you mean 'model_api'?" in text and "did you mean 'resolve'?" in text


def test_resolve_entries(tmp_path: Path) -> None:
    assert resolve_problem("pypi.org", "127.0.0.1:8080") is None
    assert resolve_problem("pypi.org:443", "[::1]:8443") is None
    assert "is not an IP address" in (resolve_problem("pypi.org", "localhost") or "")
    assert "is not an IP address" in (resolve_problem("pypi.org", "127.1") or "")
    assert resolve_table({"PyPI.org:443": "127.0.0.1:1", "a.test": "::1"}) == {
        ("pypi.org", 443): ("127.0.0.1", 1), ("a.test", None): ("::1", None)}


def test_the_shipped_policy_lists_the_host_agents_model_apis_for_guard_run(repo: Path) -> None:
    g = Guard.load(worktree=repo)
    for host in ("api.anthropic.com:443", "api.openai.com:443",
                 "generativelanguage.googleapis.com:443"):
        assert g.decide_effect("plan", Effect.network(host, via="run")).allowed, host
        assert not g.decide_effect("plan", Effect.network(host)).allowed, host
    # nothing else by default, and nothing that writes
    assert g.decide_effect("plan", Effect.network("pypi.org:443")).action is Action.ASK
    post = Effect.network("api.anthropic.com:443", changes_remote=True)
    assert not g.decide_effect("plan", post).allowed


def test_the_egress_dialect_turns_connections_into_network_effects() -> None:
    def one(name: str, data: dict[str, object]) -> Effect:
        [e] = effects_for("egress", name, data, "/w")
        return e

    e = one("connect", {"host": "pypi.org", "port": 443, "via": "run"})
    assert (e.kind, e.target, e.changes_remote, e.via) == (EffectKind.NETWORK, "pypi.org:443",
                                                           False, "run")
    for method, changes in [("GET", False), ("HEAD", False), ("OPTIONS", False),
                            ("POST", True), ("PUT", True), ("DELETE", True), ("PATCH", True),
                            ("PROPFIND", True)]:
        e = one("request", {"host": "h", "port": 80, "method": method, "path": "/x"})
        assert e.changes_remote is changes, method
    assert one("request", {"host": "h", "port": 80, "method": "GET", "path": "/",
                           "body": True}).changes_remote
    fetch = {"host": "h", "port": 80, "method": "POST", "path": "/r.git/git-upload-pack",
             "body": True, "content_type": "application/x-git-upload-pack-request"}
    assert not one("request", fetch).changes_remote
    # anything that a server could read as another service is a write
    for path in ("/r.git/git-receive-pack", "/r.git/git%2Dupload-pack",
                 "/r.git/git-receive-pack%00/git-upload-pack", "/r.git/git-upload-pack/"):
        assert one("request", {**fetch, "path": path}).changes_remote, path
    assert one("request", {**fetch, "content_type": "text/plain"}).changes_remote
    e = one("address", {"host": "a.test", "port": 80, "address": "::1", "class": "loopback"})
    assert e.target == "[::1]:80" and "DNS rebinding" in e.detail
    for bad in [{"host": "h"}, {"host": "h", "port": "80"}, {"host": "", "port": 1},
                {"host": "h", "port": 1, "via": "hook"}]:
        with pytest.raises(GuardError):
            effects_for("egress", "connect", bad, None)
    with pytest.raises(GuardError, match="unknown call"):
        effects_for("egress", "socks", {}, None)


def test_both_engines_decide_network_targets_the_same(repo: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    require_engine("re2")
    (repo / "p.toml").write_text(POLICY)
    monkeypatch.setattr(guard.match.re2_engine, "DEFAULT_ENGINE", "python")
    ref = Guard.load(repo / "p.toml", worktree=repo)
    monkeypatch.setattr(guard.match.re2_engine, "DEFAULT_ENGINE", "re2")
    fast = Guard.load(repo / "p.toml", worktree=repo)
    rng = random.Random(5)
    hosts = ["a.example.com", "evil.example.com", "pypi.org", "10.1.2.3", "::1", "x.corp.test",
             "api.anthropic.com", "h"]
    for _ in range(300):
        host = rng.choice(hosts)
        port = rng.choice([None, 22, 25, 80, 443, 5432, 8080])
        e = Effect.network(format_target(host, port), via=rng.choice(["", "run"]),
                           changes_remote=rng.random() < 0.3)
        for agent in ("n", "p"):
            want, got = ref.decide_effect(agent, e), fast.decide_effect(agent, e)
            assert (got.action, got.reason, got.rule) == (want.action, want.reason, want.rule)


def test_guard_check_and_explain_take_host_and_port(repo: Path) -> None:
    (repo / "p.toml").write_text(POLICY)
    guard_bin = [sys.executable, "-m", "guard"]
    out = subprocess.run([*guard_bin, "check", "--json", "--policy", "p.toml", "--agent", "n",
                          "network", "a.example.com:22"], cwd=repo, capture_output=True,
                         text=True, check=False)
    assert out.returncode == 1, out
    assert json.loads(out.stdout)["decision"] == "deny"
    out = subprocess.run([*guard_bin, "explain", "--policy", "p.toml", "--agent", "n",
                          "network", "a.example.com:22"], cwd=repo, capture_output=True,
                         text=True, check=False)
    assert "network a.example.com:22" in out.stdout, out
    assert "!*.example.com:22" in out.stdout and "decides this list" in out.stdout
