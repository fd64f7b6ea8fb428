"""One headless run of each pinned host CLI against its scripted model on 127.0.0.1.

Shared by the end-to-end tests and tests/replay/make_fixtures.py (which writes the
replay fixtures with the same runs): each host's private home and configuration
pointing it at the scripted model, the model server started for the run, the
host's command line; :func:`host_project` is the tests' project (a private home,
a committed git repository, guard installed as README says).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from .fake_anthropic import FakeAnthropic
from .fake_anthropic import Script as AnthropicScript
from .fake_models import FakeChat, FakeGemini, FakeResponses, Script
from .hosts_common import REAL_HOME, clean_env, guard, make_repo, stop_hookd

PROMPT = "Carry out the task."
#: The plan every scripted model writes unless a test gives its own.
PLAN = "# Plan\n\n1. change app.py\n"

Run = subprocess.CompletedProcess[str]
T = TypeVar("T")


def _run(argv: list[str], repo: Path, env: dict[str, str], timeout: float = 300) -> Run:
    return subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False, stdin=subprocess.DEVNULL)


@contextmanager
def host_project(
    tmp_path: Path, setup: Callable[[Path, dict[str, str]], None], install: str | None = None
) -> Iterator[tuple[Path, dict[str, str]]]:
    """(repository, environment): ``tmp_path/home`` as HOME, made ready by ``setup(home,
    env)``; ``guard install INSTALL`` run in the repository when given; the hook daemons
    the test started stopped afterwards."""
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home)
    setup(home, env)
    repo = make_repo(tmp_path, env)
    try:
        if install:
            proc = guard("install", install, cwd=repo, env=env)  # as the README says
            assert f"checked: {install} will run the hook" in proc.stdout, proc.stdout
        yield repo, env
    finally:
        stop_hookd(home)


def ran_whole_script(script: Script, host: str, proc: Run) -> None:
    """Every scripted call got its result back from the host."""
    answered = [s.id for s in script.steps if s.id in script.results]
    assert answered == [s.id for s in script.steps], (
        f"{host} did not run the whole script ({answered}); exit {proc.returncode}\n"
        f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")


# -- Claude Code ----------------------------------------------------------------------------

CLAUDE_ENV = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-dummy-key-for-a-local-fake",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


def claude_print(claude: str, repo: Path, env: dict[str, str], script: AnthropicScript,
                 *flags: str) -> Run:
    """``claude -p PROMPT --output-format json FLAGS`` against the scripted Messages API."""
    with FakeAnthropic(script) as api:
        return _run([claude, "-p", PROMPT, "--output-format", "json", *flags], repo,
                    {**env, **CLAUDE_ENV, "ANTHROPIC_BASE_URL": api.url})


# -- Codex CLI ------------------------------------------------------------------------------


def codex_home(home: Path, env: dict[str, str]) -> None:
    """A private CODEX_HOME whose model provider is the scripted Responses API (its URL is
    given per run) and whose own sandbox is off, so guard's hook is the only check."""
    (home / ".codex").mkdir(parents=True)
    env["CODEX_HOME"] = str(home / ".codex")
    env["FAKE_MODEL_KEY"] = "dummy"
    (home / ".codex/config.toml").write_text(
        'model = "gpt-5.5"\nmodel_provider = "fake"\napproval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n\n'
        '[model_providers.fake]\nname = "fake"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'wire_api = "responses"\nenv_key = "FAKE_MODEL_KEY"\nrequest_max_retries = 0\n'
        "stream_max_retries = 0\n"
    )


def codex_exec(codex: str, repo: Path, env: dict[str, str], script: Script,
               prompt: str = PROMPT) -> Run:
    """``codex exec PROMPT`` in ``repo`` against the scripted Responses API; asserts that
    Codex ran the whole script (likewise the other hosts' runs below)."""
    with FakeResponses(script) as api:
        proc = _run([codex, "exec", "--skip-git-repo-check", "-C", str(repo),
                     "-c", f'model_providers.fake.base_url="{api.url}/v1"', prompt], repo, env)
    ran_whole_script(script, "Codex", proc)
    return proc


def codex_patch(op: str, path: str, body: str) -> dict[str, str]:
    """The arguments of Codex's apply_patch custom tool: one ``op`` (Add, Update) of ``path``."""
    return {"input": f"*** Begin Patch\n*** {op} File: {path}\n{body}*** End Patch\n"}


# -- Gemini CLI -----------------------------------------------------------------------------


def gemini_home(home: Path, env: dict[str, str]) -> None:
    """User settings that pick API-key auth, and a key for the scripted Gemini API."""
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini/settings.json").write_text(json.dumps(
        {"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    env["GEMINI_API_KEY"] = "dummy"


def gemini_run(gemini: str, repo: Path, env: dict[str, str], script: Script, *flags: str,
               prompt: str = PROMPT) -> Run:
    """``gemini FLAGS -m gemini-2.5-pro -p PROMPT`` against the scripted Gemini API (``-m``
    names the model, so no routing side call)."""
    with FakeGemini(script) as api:
        proc = _run([gemini, *flags, "-m", "gemini-2.5-pro", "-p", prompt], repo,
                    {**env, "GOOGLE_GEMINI_BASE_URL": api.url})
    ran_whole_script(script, "Gemini", proc)
    return proc


# -- OpenCode -------------------------------------------------------------------------------


def opencode_home(home: Path, env: dict[str, str]) -> None:
    """No autoupdate; the npm packages OpenCode installs on first run (its provider
    ``@ai-sdk/openai-compatible``) come through the shared npm cache."""
    env["NPM_CONFIG_CACHE"] = os.environ.get("NPM_CONFIG_CACHE") or os.path.join(REAL_HOME,
                                                                                 ".npm")
    env["OPENCODE_DISABLE_AUTOUPDATE"] = "true"


def opencode_run(opencode: str, repo: Path, env: dict[str, str], script: Script) -> Run:
    """``opencode run`` with the repository's opencode.json naming the scripted chat
    completions as its model and allowing every permission (guard's plugin decides)."""
    with FakeChat(script) as api:
        (repo / "opencode.json").write_text(json.dumps({
            "provider": {"fake": {
                "npm": "@ai-sdk/openai-compatible", "name": "Fake",
                "options": {"baseURL": f"{api.url}/v1", "apiKey": "dummy"},
                "models": {"fake-model": {"name": "Fake model"}},
            }},
            "model": "fake/fake-model",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
        }))
        proc = _run([opencode, "run", "-m", "fake/fake-model", PROMPT], repo, env, timeout=600)
    ran_whole_script(script, "OpenCode", proc)
    return proc


# -- the replay fixtures' calls -------------------------------------------------------------


def five_calls(make: Callable[[str, str, dict[str, Any]], T], prefix: str, read: str,
               write: str, shell: str, path_key: str, root: Path | None) -> list[T]:
    """The five calls of tests/replay/fixtures/README.md as one host's tool calls: read
    src/app.py, write src/new.py, ``sed -i`` on src/app.py, write the plan file, ``ls src``.
    ``make(id, tool, arguments)`` builds one (ids are ``prefix`` + read, write, sed, plan, ls);
    the tools' names and path argument are the host's; paths are under ``root``, or relative
    when it is None."""

    def path(rel: str) -> str:
        return rel if root is None else str(root / rel)

    return [
        make(f"{prefix}read", read, {path_key: path("src/app.py")}),
        make(f"{prefix}write", write, {path_key: path("src/new.py"), "content": "owned = True\n"}),
        make(f"{prefix}sed", shell, {"command": "sed -i 's/hello/owned/' src/app.py",
                                     "description": "edit in place"}),
        make(f"{prefix}plan", write, {path_key: path(".openoxide/plans/x.md"), "content": PLAN}),
        make(f"{prefix}ls", shell, {"command": "ls src", "description": "list"}),
    ]
