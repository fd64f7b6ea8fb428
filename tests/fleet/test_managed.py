"""The managed layer: rules no user, project or --policy layer can weaken (docs/fleet.md).

Each attack of the issue's set is run for real (CLI and installed hook processes, the
real kernel's file ownership, setpriv for the unprivileged user, a private mount
namespace for the real /etc/openoxide/managed.d) and the disk is checked afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from integrations.conftest import stop_hookd
from nobody import reach

from guard.decide import Guard
from guard.policy.managed import ManagedError, load_managed
from guard.setup.install import hook_command

from .conftest import NOBODY, Managed, guard_cmd, nobody_home, run_guard

ACME = """\
version = 1
description = "ACME: secrets and CI stay closed"

[managed]
pin = ["protected", "confine", "audit"]

[managed.all.write]
deny = ["secrets/", ".github/workflows/"]

[managed.all.read]
ask = [".env"]

[managed.plan.write]
default = "deny"

[managed.all.tools]
webfetch = "deny"
"""

LAX = """\
version = 1
extends = ["builtin:default"]

[agents.build]
mode = "build"
default = "allow"
protected = false

[agents.build.write]
allow = ["**"]

[agents.plan]
mode = "plan"
default = "allow"

[agents.plan.write]
allow = ["**"]
default = "allow"

[agents.plan.tools]
"*" = "allow"

[agents.yolo]
mode = "build"
default = "allow"
protected = false
tools = { "*" = "allow" }

[agents.yolo.write]
allow = ["**", "secrets/**", ".github/**"]
"""


@pytest.fixture
def acme(managed: Managed) -> Managed:
    managed.write("10-acme.toml", ACME)
    return managed


@pytest.fixture
def lax_repo(repo: Path) -> Path:
    """The repository's own policy allows everything, to every agent."""
    (repo / ".openoxide" / "policy.toml").write_text(LAX)
    (repo / "secrets").mkdir()
    (repo / "secrets" / "key.pem").write_text("KEY\n")
    return repo


def check(repo: Path, *args: str, env: dict[str, str] | None = None,
          user: int | None = None) -> subprocess.CompletedProcess[str]:
    return run_guard("check", "--json", *args, cwd=repo, env=env, user=user)


def decision_of(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode in (0, 1, 3), proc.stderr
    return str(json.loads(proc.stdout)["decision"])


def hook(repo: Path, tool: str, tool_input: dict[str, object], env: dict[str, str],
         daemon: bool = False) -> subprocess.CompletedProcess[str]:
    payload = {
        "session_id": "s-1", "transcript_path": str(repo / "t.jsonl"), "cwd": str(repo),
        "permission_mode": "acceptEdits", "hook_event_name": "PreToolUse",
        "tool_name": tool, "tool_input": tool_input, "tool_use_id": "toolu_1",
    }
    return subprocess.run(
        ["/bin/sh", "-c", hook_command("claude-code")], input=json.dumps(payload),
        capture_output=True, text=True, cwd=repo, timeout=120, check=False,
        env={**env, "GUARD_HOOK_DAEMON": "1" if daemon else "0"},
    )


def hook_decision(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"])


# -- a project policy re-allowing a managed deny ---------------------------------------


def test_project_policy_cannot_reallow_a_managed_deny(acme: Managed, lax_repo: Path) -> None:
    for agent in ("build", "plan", "yolo"):  # yolo: an agent the project made up
        d = json.loads(check(lax_repo, "--agent", agent, "write", "secrets/key.pem").stdout)
        assert d["decision"] == "deny", d
        assert "10-acme.toml:8: managed.all.write.deny[0]" in d["rule"]
        got = check(lax_repo, "--agent", agent, "write", ".github/workflows/ci.yml")
        assert decision_of(got) == "deny"
        assert decision_of(check(lax_repo, "--agent", agent, "read", ".env")) == "ask"
    # guard explain names the managed file and line that decided
    ex = run_guard("explain", "--agent", "build", "write", "secrets/key.pem", cwd=lax_repo,
                   env={**os.environ, "NO_COLOR": "1"})
    assert ex.returncode == 1, ex.stderr
    assert f"managed: {acme.dir / '10-acme.toml'} (pins: audit, confine, protected" in ex.stdout
    decider = [ln for ln in ex.stdout.splitlines() if "managed.all.deny@10-acme.toml" in ln]
    assert decider and "10-acme.toml:8:secrets/" in decider[0]
    assert "<- decides this list" in decider[0]
    assert "rule: " + str(acme.dir / "10-acme.toml") + ":8: managed.all.write.deny[0]" in (
        ex.stdout)
    # what the project may still do: its own allows elsewhere
    assert decision_of(check(lax_repo, "--agent", "build", "write", "src/app.py")) == "allow"
    assert (lax_repo / "secrets" / "key.pem").read_text() == "KEY\n"


def test_managed_floor_and_tools_raise_a_lax_plan_agent(acme: Managed, lax_repo: Path) -> None:
    # the project's plan agent allows every write; the managed plan default is deny
    d = json.loads(check(lax_repo, "--agent", "plan", "write", "src/app.py").stdout)
    assert d["decision"] == "deny" and "managed.plan.write.default" in d["rule"], d
    assert "no managed list decides it" in d["reason"]
    # a tool the project allows with "*": the managed tool entry denies it
    got = check(lax_repo, "--agent", "yolo", "--dialect", "claude-code", "--tool", "WebFetch",
                "--input", '{"url": "https://example.com"}')
    d = json.loads(got.stdout)
    assert d["decision"] == "deny" and "managed.all.tools.webfetch" in d["rule"], d


def test_pins_keep_protected_paths_confinement_and_the_audit(
    acme: Managed, lax_repo: Path
) -> None:
    # protected = false in the project: the pin keeps .git/hooks protected
    got = check(lax_repo, "--agent", "yolo", "write", ".git/hooks/pre-commit")
    assert decision_of(got) == "deny"
    g = Guard.load(cwd=lax_repo)
    assert all(a.protected for a in g.loaded.model.agents.values())
    assert g.loaded.model.agents["plan"].sandbox.confine
    # the managed files are protected too (an agent may run as root)
    assert decision_of(check(lax_repo, "--agent", "yolo", "write",
                             str(acme.dir / "10-acme.toml"))) == "deny"
    run = run_guard("run", "--agent", "plan", "--allow-unconfined", "--", "true", cwd=lax_repo)
    assert run.returncode == 2 and "--allow-unconfined is refused" in run.stderr, run.stderr
    mcp = run_guard("mcp", "--audit", "refusals", "--", "true", cwd=lax_repo)
    assert mcp.returncode == 2 and "pins the audit" in mcp.stderr, mcp.stderr


# -- GUARD_POLICY and --policy pointing elsewhere --------------------------------------


def test_policy_option_and_variable_cannot_bypass_the_managed_layer(
    acme: Managed, lax_repo: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(LAX)
    env = {**os.environ, "GUARD_POLICY": str(elsewhere)}
    for args, e in (
        (("--policy", str(elsewhere)), None),
        (("--policy", "builtin:default"), None),
        ((), env),
    ):
        got = check(lax_repo, *args, "--agent", "build", "write", "secrets/key.pem", env=e)
        assert decision_of(got) == "deny", got.stdout
    # the installed hook (in-process and through hookd) with GUARD_POLICY set
    hook_env = {**env, "GUARD_AGENT": "yolo"}
    write = {"file_path": str(lax_repo / "secrets" / "key.pem"), "content": "owned"}
    try:
        for daemon in (False, True):
            assert hook_decision(hook(lax_repo, "Write", write, hook_env, daemon)) == "deny"
    finally:
        stop_hookd(Path(os.environ["HOME"]))
    assert (lax_repo / "secrets" / "key.pem").read_text() == "KEY\n"


# -- untrusted managed files -------------------------------------------------------------


def assert_refused(repo: Path, needle: str, env: dict[str, str] | None = None) -> None:
    """Every command and the hook refuse (fail closed), saying why."""
    env = dict(os.environ) if env is None else env
    got = check(repo, "--agent", "build", "write", "src/app.py", env=env)
    assert got.returncode == 2 and needle in got.stderr, got.stderr
    assert "Traceback" not in got.stderr
    explain = run_guard("explain", "write", "src/app.py", cwd=repo, env=env)
    assert explain.returncode == 2 and needle in explain.stderr
    write = {"file_path": str(repo / "src" / "app.py"), "content": "owned"}
    blocked = hook(repo, "Write", write, {**env, "GUARD_AGENT": "build"})
    assert blocked.returncode == 2 and needle in blocked.stderr, blocked.stderr
    assert (repo / "src" / "app.py").read_text() == "print('hi')\n"


def test_world_writable_managed_file_refuses_everything(acme: Managed, lax_repo: Path) -> None:
    os.chmod(acme.dir / "10-acme.toml", 0o666)
    assert_refused(lax_repo, "10-acme.toml is writable by group and others (mode 666)")


def test_group_writable_or_user_owned_directory_refuses(acme: Managed, lax_repo: Path) -> None:
    os.chmod(acme.dir, 0o775)
    assert_refused(lax_repo, "managed.d is writable by group (mode 775)")
    os.chmod(acme.dir, 0o755)
    os.chown(acme.top, NOBODY, NOBODY)  # a directory above it
    assert_refused(lax_repo, f"{acme.top} is owned by uid {NOBODY}, not root")
    os.chown(acme.top, 0, 0)
    os.chown(acme.dir / "10-acme.toml", NOBODY, 0)
    assert_refused(lax_repo, "10-acme.toml is owned by uid 65534, not root")


def test_symlinked_managed_dir_or_file_refuses(acme: Managed, lax_repo: Path) -> None:
    link = acme.top / "link.d"
    link.symlink_to(acme.dir)  # even to a trusted directory: the walk follows no link
    env = {**os.environ, "GUARD_MANAGED_DIR": str(link)}
    assert_refused(lax_repo, "link.d is a symbolic link", env)
    inside = acme.top / "real"
    inside.mkdir(mode=0o755)
    (acme.dir / "20-link.toml").symlink_to(acme.dir / "10-acme.toml")
    assert_refused(lax_repo, "20-link.toml is a symbolic link")


def test_extends_cycle_through_the_managed_dir_refuses(acme: Managed, lax_repo: Path) -> None:
    acme.write("20-a.toml", 'version = 1\nextends = ["30-b.toml"]\n')
    acme.write("30-b.toml", 'version = 1\nextends = ["20-a.toml"]\n')
    assert_refused(lax_repo, "extends: cycle")
    # a managed file extending a file the user can write: refused too
    (acme.dir / "30-b.toml").unlink()
    user_file = lax_repo / "mine.toml"
    user_file.write_text("version = 1\n")
    acme.write("20-a.toml", f'version = 1\nextends = ["{user_file}"]\n')
    assert_refused(lax_repo, "/tmp is writable by group and others (mode 1777)")


def test_project_policy_extending_a_managed_file_is_a_clear_error(
    acme: Managed, lax_repo: Path
) -> None:
    (lax_repo / ".openoxide" / "policy.toml").write_text(
        f'version = 1\nextends = ["builtin:default", "{acme.dir / "10-acme.toml"}"]\n'
    )
    got = check(lax_repo, "--agent", "build", "write", "src/app.py")
    assert got.returncode == 2 and "a managed policy file applies by itself" in got.stderr


def test_allow_list_in_a_managed_file_is_refused_with_the_fix(
    managed: Managed, lax_repo: Path
) -> None:
    managed.write("10-x.toml", 'version = 1\n\n[managed.all.write]\nallow = ["src/"]\n')
    assert_refused(lax_repo, "10-x.toml:4: managed.all.write.allow: the managed layer cannot"
                             " allow")


def test_a_managed_file_replaced_during_loading_is_never_read_unchecked(
    acme: Managed,
) -> None:
    """Attack: swap the checked file for the attacker's between the check and the read. The
    file is opened once and checked on the descriptor, so every load sees either the root
    file or a refusal, never the attacker's rules (the swap runs as fast as it can)."""
    evil = acme.top / "evil.toml"
    evil.write_text('version = 1\ndescription = "EVIL"\n')
    os.chown(evil, NOBODY, NOBODY)
    good = acme.top / "good.toml"
    good.write_text(ACME)
    stop = threading.Event()

    def swap() -> None:
        target = acme.dir / "10-acme.toml"
        while not stop.is_set():
            for src in (evil, good):
                tmp = acme.dir / ".swap"
                shutil.copy2(src, tmp)
                os.chown(tmp, os.stat(src).st_uid, 0)
                os.replace(tmp, target)

    t = threading.Thread(target=swap, daemon=True)
    t.start()
    seen = {"root": 0, "refused": 0}
    try:
        for _ in range(400):
            try:
                layer = load_managed()
            except ManagedError as exc:
                assert "owned by uid 65534" in str(exc) or "does not exist" in str(exc), exc
                seen["refused"] += 1
                continue
            assert layer is not None
            assert layer.parts[0].loaded.texts[str(acme.dir / "10-acme.toml")] == ACME
            seen["root"] += 1
    finally:
        stop.set()
        t.join()
    assert seen["root"] and seen["refused"], seen  # both sides of the race were reached


# -- the unprivileged user -------------------------------------------------------------


@pytest.fixture
def open_repo() -> Iterator[Path]:
    """A repository the unprivileged user can read (pytest's tmp_path is root's alone)."""
    top = Path(tempfile.mkdtemp(prefix="guard-managed-repo-"))
    os.chmod(top, 0o755)
    repo = top / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".openoxide").mkdir()
    (repo / ".openoxide" / "policy.toml").write_text(LAX)
    (repo / "secrets").mkdir()
    (repo / "secrets" / "key.pem").write_text("KEY\n")
    for p in [repo, *repo.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    try:
        yield repo
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_unprivileged_user_cannot_weaken_the_managed_layer(
    acme: Managed, open_repo: Path, tmp_path: Path
) -> None:
    home = nobody_home(tmp_path)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GUARD_MANAGED_DIR": str(acme.dir)}
    got = check(open_repo, "--agent", "yolo", "write", "secrets/key.pem", env=env, user=NOBODY)
    assert decision_of(got) == "deny", got.stderr
    # its own managed directory, made to look like one: refused, not used instead
    own = acme.top / "nobody.d"  # under /tmp it would be refused for /tmp already
    own.mkdir()
    os.chown(own, NOBODY, NOBODY)
    bad = {**env, "GUARD_MANAGED_DIR": str(own)}
    got = check(open_repo, "--agent", "yolo", "write", "src/x", env=bad, user=NOBODY)
    assert got.returncode == 2 and "is owned by uid 65534, not root" in got.stderr
    # it cannot change the managed files themselves (the kernel refuses)
    wrote = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "sh", "-c",
         f"echo 'version = 1' > {acme.dir}/10-acme.toml || echo x > {acme.dir}/99.toml"],
        capture_output=True, text=True, check=False)
    assert wrote.returncode != 0 and "Permission denied" in wrote.stderr
    assert (acme.dir / "10-acme.toml").read_text() == ACME
    assert sorted(os.listdir(acme.dir)) == ["10-acme.toml"]


# -- the real /etc/openoxide/managed.d, in a private mount namespace ------------------


def in_namespace(upper: Path, *cmd: str, env: dict[str, str], cwd: Path,
                 user: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` where /etc is overlaid with ``upper`` (a private mount namespace)."""
    work = upper.parent / "work"
    work.mkdir(exist_ok=True)
    drop = f"setpriv --reuid={user} --regid={user} --clear-groups " if user is not None else ""
    script = (f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} /etc"
              f' && exec {drop}"$@"')
    shim = reach() if user is not None else []
    return subprocess.run([*shim, "unshare", "-m", "--propagation", "private", "sh", "-c",
                           script, "sh", *cmd], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_variable_cannot_hide_the_system_managed_dir(
    managed: Managed, open_repo: Path, tmp_path: Path
) -> None:
    """$GUARD_MANAGED_DIR names an empty (trusted) directory: the system directory's
    rules still apply, for root and for the unprivileged user."""
    upper = managed.top / "upper"
    system = upper / "openoxide" / "managed.d"
    system.mkdir(parents=True)
    for p in (upper, upper / "openoxide", system):
        os.chmod(p, 0o755)
    managed.write("10-acme.toml", ACME, where=system)
    home = nobody_home(tmp_path)
    env = {"PATH": os.environ["PATH"], "HOME": str(home),
           "GUARD_MANAGED_DIR": str(managed.dir)}  # empty, trusted
    for user in (None, NOBODY):
        got = in_namespace(upper, *guard_cmd("check", "--json", "--agent", "yolo", "write",
                                             "secrets/key.pem"),
                           env=env, cwd=open_repo, user=user)
        d = json.loads(got.stdout)
        assert d["decision"] == "deny", got.stderr
        assert "/etc/openoxide/managed.d/10-acme.toml:8:" in d["rule"]
    assert not Path("/etc/openoxide").exists()  # the overlay stayed in its namespace


def test_guard_run_cannot_make_writable_what_the_managed_layer_denies(
    managed: Managed, lax_repo: Path
) -> None:
    """A user's sandbox.writable root (or --writable) where the managed layer denies
    writing would let the kernel pass what the policy refuses: refused before starting."""
    out = managed.top / "out"
    out.mkdir()
    managed.write("10-x.toml", f'version = 1\n\n[managed.all.write]\ndeny = ["/{out}/"]\n')
    (lax_repo / ".openoxide" / "policy.toml").write_text(
        LAX + f'\n[agents.plan.sandbox]\nwritable = ["{out}"]\n')
    got = run_guard("run", "--agent", "plan", "--explain", cwd=lax_repo)
    assert got.returncode == 2, got.stdout
    assert "would make writable what the managed policy denies" in got.stderr
    assert "10-x.toml:4: managed.all.write.deny[0]" in got.stderr
    (lax_repo / ".openoxide" / "policy.toml").write_text(LAX)
    got = run_guard("run", "--agent", "plan", "--writable", str(out), "--explain", cwd=lax_repo)
    assert got.returncode == 2 and "managed policy denies" in got.stderr


def test_managed_network_rules_take_host_and_port_and_beat_model_api(
    managed: Managed, tmp_path: Path
) -> None:
    """A managed network list is read like any policy's (HOST or HOST:PORT): it denies a
    port of a host the user's policy allows, and the host agent's model API under guard
    run too; a malformed entry refuses the whole managed layer with its fix."""
    from guard.effects import Action, Effect

    managed.write("net.toml", 'version = 1\n[managed.all.network]\n'
                              'deny = ["*.example.com:22", "api.anthropic.com"]\n')
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "p.toml").write_text('version = 1\nextends = ["builtin:default"]\n'
                                 '[agents.build.network]\nallow = ["*.example.com"]\n')
    g = Guard.load(repo / "p.toml", worktree=repo)
    assert g.decide_effect("build", Effect.network("a.example.com:443")).allowed
    d = g.decide_effect("build", Effect.network("a.example.com:22"))
    assert d.action is Action.DENY and "net.toml" in d.rule
    api = g.decide_effect("plan", Effect.network("api.anthropic.com:443", via="run"))
    assert api.action is Action.DENY and "net.toml" in api.rule
    managed.write("net.toml", 'version = 1\n[managed.all.network]\ndeny = ["a/b"]\n')
    with pytest.raises(ManagedError, match="HOST or HOST:PORT"):
        Guard.load(repo / "p.toml", worktree=repo)


# -- a project declaring its plan agent a build agent ----------------------------------

DISGUISED = """\
version = 1
extends = ["builtin:default"]

[agents.plan]
mode = "build"
default = "allow"

[agents.plan.write]
allow = ["**"]
"""


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_plan_agent_declared_build_cannot_escape_the_managed_plan_rules(
    acme: Managed, tmp_path: Path, user: str
) -> None:
    """Attack: the repository's policy declares its ``plan`` agent with ``mode = "build"``
    (and lets it write everything), so that the fleet's ``[managed.plan]`` rules and the
    ``confine`` pin, which apply by declared mode, would miss the agent plan mode uses.
    In plan mode the hook's Write and unknown program into src/, ``guard check`` and
    ``guard run --agent plan`` are all refused, naming the policy line and the fix; as
    root and as uid 65534; src/ is unchanged."""
    top = Path(tempfile.mkdtemp(prefix="guard-disguised-"))
    try:
        os.chmod(top, 0o755)
        repo = top / "repo"
        (repo / "src").mkdir(parents=True)
        (repo / "src" / "app.py").write_text("print('hi')\n")
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (repo / ".openoxide").mkdir()
        (repo / ".openoxide" / "policy.toml").write_text(DISGUISED)
        home = top / "home"
        home.mkdir()
        uid = None if user == "root" else NOBODY
        for p in [top, *top.rglob("*")]:
            os.chown(p, uid or 0, uid or 0)
        env = {"PATH": os.environ["PATH"], "HOME": str(home),
               "GUARD_MANAGED_DIR": str(acme.dir), "GUARD_HOOK_DAEMON": "0"}
        started = run_guard("plan", "start", "Refactor", cwd=repo, env=env, user=uid)
        assert started.returncode == 0, started.stderr
        fix = 'agents.plan.mode: the agent named plan is declared mode = \'build\''
        app = repo / "src" / "app.py"
        sneaky = f"python3 -c \"open('{app}', 'w').write('pwned')\""
        for tool, tool_input in (("Write", {"file_path": str(app), "content": "pwned"}),
                                 ("Bash", {"command": sneaky})):
            payload = {
                "session_id": "s-1", "transcript_path": str(top / "t.jsonl"), "cwd": str(repo),
                "permission_mode": "acceptEdits", "hook_event_name": "PreToolUse",
                "tool_name": tool, "tool_input": tool_input, "tool_use_id": "toolu_1",
            }  # fmt: skip
            drop = [] if uid is None else [
                *reach(), "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
            proc = subprocess.run(
                [*drop, "/bin/sh", "-c", hook_command("claude-code")],
                input=json.dumps(payload), capture_output=True, text=True, cwd=repo,
                timeout=120, check=False, env=env,
            )  # fmt: skip
            said = proc.stdout + proc.stderr
            assert proc.returncode == 2 or hook_decision(proc) == "deny", said
            assert fix in said, said
            assert '"updatedInput"' not in proc.stdout, "never run, confined or not"
        got = run_guard("check", "write", "src/app.py", cwd=repo, env=env, user=uid)
        assert got.returncode == 2 and fix in got.stderr and "policy.toml:5" in got.stderr
        ran = run_guard("run", "--agent", "plan", "--", "sh", "-c", "echo pwned > src/app.py",
                        cwd=repo, env=env, user=uid)
        assert ran.returncode == 2 and fix in ran.stderr, ran.stderr
        assert app.read_text() == "print('hi')\n"
    finally:
        shutil.rmtree(top, ignore_errors=True)


# -- a long-lived front door notices a managed file changed between two calls -----------


def test_attack_managed_file_rewritten_between_two_proxy_calls_is_seen(
    acme: Managed, lax_repo: Path
) -> None:
    """The MCP proxy's freshness check: the managed file is rewritten in place between two
    calls, to the same length, its mtime put back with utime (so within one tick of the
    first read). The next call decides with the new text."""
    from guard.effects import Action, Effect
    from guard.policy.freshness import PolicyWatch

    watch = PolicyWatch(Guard.load(cwd=lax_repo), lambda: Guard.load(cwd=lax_repo),
                        discovered=True)
    write = [Effect.write("src/app.py")]
    assert watch.current().decide("build", write).action is Action.ALLOW
    assert watch.current().decide("build", write).action is Action.ALLOW  # stamps now
    path = acme.dir / "10-acme.toml"
    st = path.stat()
    text = ACME.replace('deny = ["secrets/", ".github/workflows/"]',
                        'deny = ["src/**", ".github/workflows/"]  ')
    assert len(text) == len(ACME)
    with open(path, "r+") as fh:
        fh.write(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    d = watch.current().decide("build", write)
    assert d.action is Action.DENY and "managed.all.write.deny" in d.rule, d


def test_managed_stamps_read_nothing_until_a_file_changes(
    acme: Managed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a read found the layer unchanged, stamps alone vouch for it (stamps older than
    the racy window); a file replaced (new inode), made group-writable or added is seen."""
    from guard.policy import managed as m

    reads: list[int] = []
    real = m._read_unchanged

    def counted(layer: m.ManagedLayer | None, env: object) -> bool:
        reads.append(1)
        return real(layer, None)

    monkeypatch.setattr(m, "_read_unchanged", counted)
    monkeypatch.setattr(m, "RACY_NS", 0)  # every stamp is older than the last read
    layer = load_managed()
    assert layer is not None
    assert m.unchanged(layer) and len(reads) == 1
    assert m.unchanged(layer) and m.unchanged(layer) and len(reads) == 1
    acme.write("10-acme.toml", ACME)  # same text, a new file: read again, still unchanged
    assert m.unchanged(layer) and len(reads) == 2
    acme.write("10-acme.toml", ACME.replace("secrets/", "secretz/"))  # new file, same size
    assert not m.unchanged(layer)
    acme.write("10-acme.toml", ACME)
    assert m.unchanged(layer)
    os.chmod(acme.dir / "10-acme.toml", 0o664)
    assert not m.unchanged(layer)
    os.chmod(acme.dir / "10-acme.toml", 0o644)
    assert m.unchanged(layer)
    acme.write("20-more.toml", 'version = 1\ndescription = "more"\n')
    assert not m.unchanged(layer)
