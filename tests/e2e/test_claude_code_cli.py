"""End to end: the real Claude Code CLI, guard's hook from `guard install`, a scripted model.

Claude Code (npm ``@anthropic-ai/claude-code``, pinned below) runs headless
against a fake Messages API on 127.0.0.1 that asks for scripted tool calls.
The hook is the one ``guard install claude-code --project`` writes. We assert
on disk, on Claude Code's ``permission_denials`` and on guard's audit log.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import require_component

from guard import hosts

from .fake_anthropic import Script, ToolUse
from .host_runs import claude_print
from .hosts_common import stop_hookd

CLAUDE_CODE_VERSION = hosts.by_name("claude-code").version
PACKAGE = f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"
REAL_HOME = os.path.expanduser("~")


def _install_claude() -> tuple[str | None, str]:
    """The claude binary: $GUARD_E2E_CLAUDE, else npm-installed into a versioned cache prefix."""
    given = os.environ.get("GUARD_E2E_CLAUDE")
    if given:
        return (given, "") if os.access(given, os.X_OK) else (None, f"{given} not executable")
    prefix = Path(
        os.environ.get("GUARD_E2E_PREFIX")
        or os.path.join(
            REAL_HOME, ".cache", "openoxide-guard", f"claude-code-{CLAUDE_CODE_VERSION}"
        )
    )
    binary = prefix / "node_modules" / ".bin" / "claude"
    if not binary.exists():
        npm = shutil.which("npm")
        if npm is None:
            return None, "npm is not installed, so the Claude Code CLI cannot be installed"
        proc = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-fund", "--no-audit", PACKAGE],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0 or not binary.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return None, f"npm install {PACKAGE} failed: {' | '.join(tail)}"
    proc = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0 or CLAUDE_CODE_VERSION not in proc.stdout:
        return None, f"{binary} --version gave {proc.stdout.strip()!r} {proc.stderr.strip()!r}"
    return str(binary), ""


@pytest.fixture(scope="session")
def claude() -> str:
    binary, why = _install_claude()
    return str(require_component("the Claude Code CLI", binary, why))


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GUARD_", "XDG_", "ANTHROPIC_", "CLAUDE", "PYTHON"))
    }
    env.update(
        HOME=str(home),
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
    )
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('hello')\n")
    (repo / "README.md").write_text("demo\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "init"], check=True, env=env)
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "install", "claude-code", "--project"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    yield Path(os.path.realpath(repo)), env
    stop_hookd(home)


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run_claude(
    claude: str,
    repo: Path,
    env: dict[str, str],
    script: Script,
    mode: str,
    guard_agent: str | None,
    *more: str,
) -> dict[str, Any]:
    """``claude -p`` in ``repo`` with ``--permission-mode MODE`` and ``more`` flags."""
    run_env = {**env, "GUARD_AGENT": guard_agent} if guard_agent else env
    flags = ("--permission-mode", mode, "--max-turns", "30", *more)
    proc = claude_print(claude, repo, run_env, script, *flags)
    assert proc.stdout.strip(), f"claude printed nothing; stderr: {proc.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(proc.stdout)
    answered = [s.id for s in script.steps if s.id in script.tool_results()]
    assert answered == [s.id for s in script.steps], (
        f"Claude Code did not run the whole script: {answered}; result {result}"
    )
    return result


def audit_records(home: Path) -> list[dict[str, Any]]:
    from guard.audit.logfile import read  # type: ignore[import-not-found,unused-ignore]

    return [
        r
        for log in sorted(home.rglob("audit/*.jsonl"))
        for r in read(log)
        if r.get("source") == "hook"
    ]


def denied_ids(result: dict[str, Any]) -> set[str]:
    return {d["tool_use_id"] for d in result.get("permission_denials", [])}


def test_plan_agent_under_accept_edits_changes_only_the_plan(
    claude: str, project: tuple[Path, dict[str, str]]
) -> None:
    """Attacks: Write, Edit, sed -i, a shell redirection, an Edit through a symlink into src/."""
    repo, env = project
    plans = repo / ".openoxide" / "plans"
    plans.mkdir(parents=True)
    (plans / "evil.md").symlink_to(repo / "src" / "app.py")
    src_before = snapshot(repo / "src")
    settings_before = (repo / ".claude/settings.json").read_bytes()
    app = str(repo / "src" / "app.py")
    steps = [
        ToolUse("toolu_read", "Read", {"file_path": app}),
        ToolUse(
            "toolu_write_src",
            "Write",
            {"file_path": str(repo / "src/new.py"), "content": "owned = True\n"},
        ),
        ToolUse(
            "toolu_edit_src",
            "Edit",
            {"file_path": app, "old_string": "hello", "new_string": "owned"},
        ),
        ToolUse(
            "toolu_sed",
            "Bash",
            {"command": "sed -i 's/hello/owned/' src/app.py", "description": "edit in place"},
        ),
        ToolUse(
            "toolu_redirect",
            "Bash",
            {"command": "echo owned > src/y.py", "description": "write a file"},
        ),
        ToolUse(
            "toolu_plan",
            "Write",
            {"file_path": str(plans / "x.md"), "content": "# Plan\n\n1. change app.py\n"},
        ),
        ToolUse("toolu_git", "Bash",
                {"command": "git --no-optional-locks status", "description": "status"}),
        ToolUse("toolu_read_link", "Read", {"file_path": str(plans / "evil.md")}),
        ToolUse(
            "toolu_edit_link",
            "Edit",
            {"file_path": str(plans / "evil.md"), "old_string": "hello", "new_string": "owned"},
        ),
    ]
    script = Script(steps)
    result = run_claude(claude, repo, env, script, "acceptEdits", "plan")

    denied = denied_ids(result)
    attacks = {
        "toolu_write_src",
        "toolu_edit_src",
        "toolu_sed",
        "toolu_redirect",
        "toolu_edit_link",
    }
    assert attacks <= denied, result.get("permission_denials")
    assert not denied & {"toolu_plan", "toolu_git", "toolu_read"}
    assert snapshot(repo / "src") == src_before
    assert (plans / "x.md").read_text() == "# Plan\n\n1. change app.py\n"
    assert (repo / ".claude/settings.json").read_bytes() == settings_before
    results = script.tool_results()
    # git --no-optional-locks status runs confined, and a confined command does not start
    # while the plan directory holds anything but plain plan files: the planted symlink is
    # named
    assert "evil.md is a symlink" in results["toolu_git"], results["toolu_git"]
    assert "NOT started" in results["toolu_git"]
    assert "guard:" in results["toolu_write_src"], results["toolu_write_src"]

    records = audit_records(Path(env["HOME"]))
    assert [r["tool_use_id"] for r in records] == [s.id for s in steps]
    assert {r["agent"] for r in records} == {"plan"}
    by_id = {r["tool_use_id"]: r["decision"] for r in records}
    assert {i for i, d in by_id.items() if d == "deny"} == attacks


def test_claude_plan_mode_is_held_to_the_plan_agent(
    claude: str, project: tuple[Path, dict[str, str]]
) -> None:
    """No GUARD_AGENT: Claude Code's permission_mode plan picks guard's plan agent."""
    repo, env = project
    src_before = snapshot(repo / "src")
    steps = [
        ToolUse("toolu_w", "Write", {"file_path": str(repo / "src/new.py"), "content": "x\n"}),
        ToolUse("toolu_b", "Bash", {"command": "echo owned > src/y.py", "description": "w"}),
        ToolUse("toolu_r", "Read", {"file_path": str(repo / "README.md")}),
    ]
    script = Script(steps)
    result = run_claude(claude, repo, env, script, "plan", None)
    assert {"toolu_w", "toolu_b"} <= denied_ids(result)
    assert snapshot(repo / "src") == src_before
    records = audit_records(Path(env["HOME"]))
    assert [r["tool_use_id"] for r in records] == ["toolu_w", "toolu_b", "toolu_r"]
    assert {r["agent"] for r in records} == {"plan"}
    assert [r["decision"] for r in records] == ["deny", "deny", "allow"]
    # the fleet fields: the real host and its version, read from the hook's ancestors
    assert {(r["host_agent"], r["host_agent_version"]) for r in records} == {
        ("claude-code", CLAUDE_CODE_VERSION)}
    assert len({r["record_id"] for r in records}) == 3
    assert all(r["policy_digest"].startswith("sha256:") and r["session"] for r in records)


def test_build_agent_cannot_unwire_guard(claude: str, project: tuple[Path, dict[str, str]]) -> None:
    """Attack: in acceptEdits (build agent) the model rewrites .claude/settings.json."""
    repo, env = project
    settings = repo / ".claude/settings.json"
    before = settings.read_bytes()
    steps = [
        ToolUse("toolu_settings", "Write", {"file_path": str(settings), "content": "{}\n"}),
        ToolUse(
            "toolu_src", "Write", {"file_path": str(repo / "src/new.py"), "content": "ok = True\n"}
        ),
    ]
    script = Script(steps)
    result = run_claude(claude, repo, env, script, "acceptEdits", None)
    assert "toolu_settings" in denied_ids(result)
    assert "toolu_src" not in denied_ids(result)
    assert settings.read_bytes() == before
    assert (repo / "src/new.py").read_text() == "ok = True\n"
    records = audit_records(Path(env["HOME"]))
    assert [(r["agent"], r["decision"]) for r in records] == [("build", "deny"), ("build", "allow")]


def test_plan_mode_shell_runs_confined_reads_answer_and_writes_fail_on_disk(
    claude: str, project: tuple[Path, dict[str, str]]
) -> None:
    """allow_confined through the real CLI: guard rewrites plan-mode Bash calls so that
    Claude Code runs them in namespaces under Landlock + seccomp. A program guard cannot
    prove read-only runs and cannot write; a write the analysis sees is denied; reads answer
    the model."""
    from guard.sandbox import confine

    if confine.available():
        pytest.skip(f"this kernel cannot confine: {confine.available()}")
    repo, env = project
    plans = repo / ".openoxide" / "plans"
    src_before = snapshot(repo / "src")
    steps = [
        ToolUse(
            "toolu_py",
            "Bash",
            {"command": "python3 -c \"open('src/x','w').write('x')\"", "description": "py"},
        ),
        ToolUse("toolu_sed", "Bash", {"command": "sed -i 's/hello/owned/' src/app.py"}),
        ToolUse("toolu_log", "Bash", {"command": "git log --oneline", "description": "log"}),
        ToolUse("toolu_cat", "Bash", {"command": "cat src/app.py", "description": "cat"}),
        ToolUse(
            "toolu_tests",
            "Bash",
            {"command": "python3 -c \"print('tests ran', flush=True); open('src/t', 'w')\""},
        ),
        ToolUse("toolu_plan", "Write", {"file_path": str(plans / "p.md"), "content": "# P\n"}),
    ]
    script = Script(steps)
    result = run_claude(claude, repo, env, script, "acceptEdits", "plan")

    assert snapshot(repo / "src") == src_before
    assert not (repo / "src" / "x").exists() and not (repo / "src" / "t").exists()
    assert (plans / "p.md").read_text() == "# P\n"
    assert denied_ids(result) == {"toolu_sed"}, result.get("permission_denials")
    results = script.tool_results()
    assert "Read-only file system" in results["toolu_py"], results["toolu_py"]
    assert "init" in results["toolu_log"], results["toolu_log"]
    assert "print('hello')" in results["toolu_cat"], results["toolu_cat"]
    assert "tests ran" in results["toolu_tests"], results["toolu_tests"]
    records = audit_records(Path(env["HOME"]))
    by_id = {r["tool_use_id"]: r["decision"] for r in records}
    assert by_id == {
        "toolu_py": "allow_confined",
        "toolu_sed": "deny",
        "toolu_log": "allow_confined",
        "toolu_cat": "allow_confined",
        "toolu_tests": "allow_confined",
        "toolu_plan": "allow",
    }, by_id


def test_plan_mode_shell_reaches_no_local_service_nor_the_users_tmux_and_pytest_still_runs(
    claude: str, project: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Issue 25's reproductions through the real CLI: in guard's plan mode a ``python3``
    POST to a service on 127.0.0.1 and ``tmux send-keys`` to the user's tmux server run
    confined (programs guard cannot prove read-only) and do nothing; ``pytest`` runs and
    reports. The recorder, the tmux pane and the disk are checked afterwards."""
    import http.server
    import threading

    from guard.sandbox import confine

    why = confine.available() or confine.namespaces_unavailable()
    if why:
        pytest.skip(f"no namespaces here: {why}")
    repo, env = project
    (repo / "tests").mkdir()
    (repo / "tests" / "test_app.py").write_text("def test_app():\n    assert 1 + 1 == 2\n")
    requests: list[tuple[str, bytes]] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            requests.append((self.path, self.rfile.read(n)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    tmux_sock = str(tmp_path / "tmux-user.sock")  # "the user's" tmux server (private)
    subprocess.run(["tmux", "-S", tmux_sock, "new-session", "-d", "-s", "user", "-c",
                    str(repo), "sh"], check=True, env=env, timeout=60)  # fmt: skip
    src_before = snapshot(repo / "src")
    post = (
        "python3 -c \"import urllib.request as u; u.urlopen(u.Request("
        f"'http://127.0.0.1:{port}/merge', data=b'pwned', method='POST'), timeout=5)\""
    )
    steps = [
        ToolUse("toolu_post", "Bash", {"command": post, "description": "merge"}),
        ToolUse(
            "toolu_tmux",
            "Bash",
            {"command": f"tmux -S {tmux_sock} send-keys -t user 'echo pwned >> src/app.py'"
                        " Enter; echo tmux=$?", "description": "type"},
        ),
        ToolUse(
            "toolu_pytest",
            "Bash",
            {"command": f"{sys.executable} -m pytest -q -p no:cacheprovider tests",
             "description": "run the tests"},
        ),
    ]  # fmt: skip
    script = Script(steps)
    try:
        run_claude(claude, repo, env, script, "acceptEdits", "plan")
        import time

        time.sleep(1.0)  # what tmux would have typed would have run by now
        pane = subprocess.run(["tmux", "-S", tmux_sock, "capture-pane", "-p", "-t", "user"],
                              capture_output=True, text=True, env=env, timeout=60).stdout
    finally:
        subprocess.run(["tmux", "-S", tmux_sock, "kill-server"], capture_output=True, env=env)
        server.shutdown()
        server.server_close()
    results = script.tool_results()
    assert requests == [], requests
    assert "Connection refused" in results["toolu_post"], results["toolu_post"]
    assert "tmux=1" in results["toolu_tmux"], results["toolu_tmux"]
    assert "pwned" not in pane
    assert "1 passed" in results["toolu_pytest"], results["toolu_pytest"]
    assert snapshot(repo / "src") == src_before
    records = audit_records(Path(env["HOME"]))
    by_id = {r["tool_use_id"]: r["decision"] for r in records}
    assert by_id == dict.fromkeys(("toolu_post", "toolu_tmux", "toolu_pytest"), "allow_confined")


def test_guard_run_around_claude_in_plan_mode_reaches_its_model_only_through_the_proxy(
    claude: str, project: tuple[Path, dict[str, str]]
) -> None:
    """``guard run -- claude -p`` in plan mode: Claude Code itself runs in the namespaces,
    so its scripted Messages API (a host the policy lists under ``model_api``, mapped to
    the server on the host's 127.0.0.1) is reached through guard's egress proxy; the
    model's Bash calls run in there too and cannot write. Every connection is in the audit
    log as an allow by ``model_api``."""
    from guard.sandbox import confine

    from .fake_anthropic import FakeAnthropic
    from .host_runs import CLAUDE_ENV, PROMPT

    why = confine.available() or confine.namespaces_unavailable()
    if why:
        pytest.skip(f"no namespaces here: {why}")
    repo, env = project
    # guard run is the layer here, as for a host without hooks (a hook inside it could not
    # write guard's audit log, which the sandbox keeps read-only: it would refuse all)
    (repo / ".claude" / "settings.json").unlink()
    src_before = snapshot(repo / "src")
    plans = repo / ".openoxide" / "plans"
    steps = [
        ToolUse("toolu_cat", "Bash", {"command": "cat src/app.py", "description": "read"}),
        ToolUse("toolu_py", "Bash", {
            "command": "python3 -c \"open('src/x', 'w').write('x')\"", "description": "py"}),
        ToolUse("toolu_plan", "Write", {"file_path": str(plans / "p.md"), "content": "# P\n"}),
    ]  # fmt: skip
    script = Script(steps)
    with FakeAnthropic(script) as api:
        port = api.url.rsplit(":", 1)[1]
        policy = Path(env["HOME"]) / "policy.toml"
        policy.write_text(
            'version = 1\nextends = ["builtin:default"]\n'
            f'[agents.plan.network]\nmodel_api = ["api.test:{port}"]\n'
            f'[egress]\nresolve = {{ "api.test:{port}" = "127.0.0.1:{port}" }}\n'
        )
        proc = subprocess.run(
            [sys.executable, "-m", "guard", "run", "--agent", "plan", "--policy", str(policy),
             "--writable", "{home}/.claude-config",
             "--", claude, "-p", PROMPT, "--output-format", "json",
             "--permission-mode", "acceptEdits", "--allowedTools", "Bash", "--max-turns", "30"],
            cwd=repo, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
            env={**env, **CLAUDE_ENV, "GUARD_AGENT": "plan",
                 "CLAUDE_CONFIG_DIR": str(Path(env["HOME"]) / ".claude-config"),
                 "ANTHROPIC_BASE_URL": f"http://api.test:{port}"},
        )  # fmt: skip
    assert proc.stdout.strip(), f"claude printed nothing; stderr: {proc.stderr[-3000:]}"
    results = script.tool_results()
    assert set(results) == {s.id for s in steps}, (results, proc.stderr[-2000:])
    assert "print('hello')" in results["toolu_cat"]
    assert "Read-only file system" in results["toolu_py"], results["toolu_py"]
    assert snapshot(repo / "src") == src_before
    assert (plans / "p.md").read_text() == "# P\n"
    assert "namespaces:" in proc.stderr
    from guard.audit.logfile import read  # type: ignore[import-not-found,unused-ignore]

    records = [r for log in sorted(Path(env["HOME"]).rglob("audit/*.jsonl")) for r in read(log)]
    egress = [r for r in records if r.get("source") == "run" and "egress" in r]
    assert egress and all(r["decision"] == "allow" for r in egress), egress
    assert all("model_api" in str(r["rule"]) for r in egress)
