"""End to end: the real aider (pinned, its own venv) in plan mode under `guard run`.

aider has no hooks; ``guard run --agent plan`` confines the whole process (namespaces,
Landlock); it reaches the scripted model through guard's egress proxy. The recipe is
the one examples/run-aider.md gives: ``--no-git`` (with
git, aider runs ``git add`` and may write ``.git/config``, which plan mode
refuses), history files in the writable ``~/.aider``. A scripted
OpenAI-compatible model answers with whole-file edits: the plan file is
written, the edit of ``src/app.py`` is refused by the kernel (aider prints
``Read-only file system`` and still exits 0), and aider's shell (``/run``) can list
``src/`` but not write into it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from guard import hosts
from guard.sandbox.landlock import abi_version as landlock_abi

from .fake_models import Call, FakeChat, Script
from .hosts_common import check_version, clean_env, make_repo, snapshot, venv_binary

VERSION = hosts.by_name("aider").version


@pytest.fixture(scope="session")
def aider() -> str:
    binary = venv_binary(f"aider-chat=={VERSION}", f"aider-{VERSION}", "aider")
    check_version(binary, VERSION)
    return binary


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home)
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no fetch of litellm's price list
    yield make_repo(tmp_path, env), env


def run_aider(aider: str, repo: Path, env: dict[str, str], script: Script, *args: str
              ) -> subprocess.CompletedProcess[str]:
    """aider under ``guard run`` in plan mode. Its network is the namespace's loopback and
    guard's egress proxy: the scripted model is reached as ``models.test``, a host the
    policy lists as the agent's model API and maps to the server (``[egress] resolve``)."""
    home = Path(env["HOME"])
    with FakeChat(script) as api:
        port = api.url.rsplit(":", 1)[1]
        policy = home / "policy.toml"
        policy.write_text(
            'version = 1\nextends = ["builtin:default"]\n'
            f'[agents.plan.network]\nmodel_api = ["models.test:{port}"]\n'
            f'[egress]\nresolve = {{ "models.test:{port}" = "127.0.0.1:{port}" }}\n'
        )
        return subprocess.run(
            [sys.executable, "-m", "guard", "run", "--agent", "plan", "--policy", str(policy),
             "--writable", "{home}/.aider", "--",
             aider, "--model", "openai/fake-model", "--edit-format", "whole", "--yes-always",
             "--no-git", "--no-check-update", "--no-analytics", "--no-show-model-warnings",
             "--no-pretty", "--no-stream",
             "--chat-history-file", str(home / ".aider/history/repo.chat.md"),
             "--input-history-file", str(home / ".aider/history/repo.input"), *args],
            cwd=repo,
            env={**env, "OPENAI_API_BASE": f"http://models.test:{port}/v1", "OPENAI_API_KEY": "x"},
            capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL,
        )


def test_aider_plan_mode_writes_only_the_plan(
    aider: str, project: tuple[Path, dict[str, str]]
) -> None:
    if not landlock_abi():
        pytest.skip("the kernel has no Landlock")
    repo, env = project
    src_before = snapshot(repo / "src")
    reply = (".openoxide/plans/x.md\n```\n# Plan\n\n1. change app.py\n```\n\n"
             "src/app.py\n```\nprint('owned')\n```\n")
    script = Script([Call("t1", "text", {"text": reply})])
    proc = run_aider(aider, repo, env, script, "--message", "Plan the change.",
                     ".openoxide/plans/x.md", "src/app.py")
    assert len(script.requests) == 1, proc.stdout + proc.stderr
    assert proc.returncode == 0  # aider exits 0 even though its edit was refused
    assert "Read-only file system" in proc.stdout and "src/app.py" in proc.stdout, proc.stdout
    assert snapshot(repo / "src") == src_before
    assert (repo / ".openoxide/plans/x.md").read_text() == "# Plan\n\n1. change app.py\n"
    assert (Path(env["HOME"]) / ".aider/history/repo.chat.md").exists()
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], env=env,
                            capture_output=True, text=True, check=True).stdout
    assert status.splitlines() == ["?? .openoxide/"], status


def test_aider_shell_cannot_write_but_can_list(
    aider: str, project: tuple[Path, dict[str, str]]
) -> None:
    if not landlock_abi():
        pytest.skip("the kernel has no Landlock")
    repo, env = project
    src_before = snapshot(repo / "src")
    proc = run_aider(aider, repo, env, Script([]), "--message",
                     "/run echo owned > src/y.py; ls src")
    assert "cannot create src/y.py: Read-only file system" in proc.stdout, proc.stdout
    assert "app.py" in proc.stdout
    assert snapshot(repo / "src") == src_before
