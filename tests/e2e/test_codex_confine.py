# ruff: noqa: F811  (the fixtures codex and project come from test_codex_cli)
"""End to end: Codex in plan mode, guard's grammar and the confined form (real Codex, pinned).

Codex's hooks can only allow or refuse. In plan mode a shell command outside guard's
grammar is refused with the exact confined form of the model's own command; the
scripted model reads that form from the refusal and runs it; ``guard confine`` runs it
under the kernel, which refuses the write into ``src/`` while the plan file is written.
A read-only command in the grammar runs directly. Both with Codex's own sandbox off
(``danger-full-access``) and inside it (``workspace-write``: namespaces cannot stack
there, Landlock does).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .fake_models import Call, Script
from .host_runs import codex_exec
from .hosts_common import snapshot
from .test_codex_cli import codex, project  # noqa: F401  (fixtures)

FORM = re.compile(r"exactly as: (.+?) \[guard\.grammar\]")
WRITE = "echo owned > src/app.py; mkdir -p .openoxide/plans; echo '# Plan' > .openoxide/plans/x.md"
INDENTED = (
    "*** Begin Patch\n*** Add File: .openoxide/plans/y.md\n+plan\n"
    "  *** Add File: src/pwned.py\n+x\n *** Delete File: README.md\n*** End Patch\n"
)


def refusal_of(body: dict[str, Any], call_id: str) -> str:
    for item in body.get("input", []):
        if isinstance(item, dict) and item.get("call_id") == call_id and "output" in item:
            out = item["output"]
            return out if isinstance(out, str) else json.dumps(out)
    raise AssertionError(f"no result for {call_id} in the conversation")


def confined_from_refusal(body: dict[str, Any]) -> dict[str, Any]:
    """The model's next call: the confined form the refusal of call_write handed it."""
    m = FORM.search(refusal_of(body, "call_write"))
    assert m, refusal_of(body, "call_write")
    return {"cmd": m.group(1)}


@pytest.mark.parametrize("sandbox", ["danger-full-access", "workspace-write"])
def test_codex_plan_mode_refuses_with_the_confined_form_which_the_kernel_confines(
    codex: str, project: tuple[Path, dict[str, str]], sandbox: str, tmp_path: Path
) -> None:
    repo, env = project
    env = {**env, "GUARD_AGENT": "plan"}
    if sandbox != "danger-full-access":
        # Codex makes its sandbox helper only when CODEX_HOME is outside the temp dir
        (tmp_path / "tmp").mkdir()
        env["TMPDIR"] = str(tmp_path / "tmp")
    src_before = snapshot(repo / "src")
    readme = (repo / "README.md").read_bytes()
    script = Script([
        Call("call_write", "exec_command", {"cmd": WRITE}),
        Call("call_confined", "exec_command", confined_from_refusal),
        Call("call_ls", "exec_command", {"cmd": "ls -la src | head -5 && git log --oneline -1"}),
        Call("call_patch", "apply_patch", {"input": INDENTED}, kind="custom"),
    ])
    codex_exec(codex, repo, {**env}, script) if sandbox == "danger-full-access" else \
        _codex_in_sandbox(codex, repo, env, script, sandbox)

    results = script.results
    print(json.dumps(results, indent=1))  # shown with -s: what the model saw
    assert "guard confine -- bash -c" in results["call_write"], results["call_write"]
    assert "guard:" not in results["call_confined"], results["call_confined"]
    assert "app.py" in results["call_ls"] and "guard:" not in results["call_ls"]
    assert "guard:" in results["call_patch"] and "column 0" in results["call_patch"]
    # the kernel refused src/, the plan file was written; the indented patch changed nothing
    assert snapshot(repo / "src") == src_before
    assert (repo / "README.md").read_bytes() == readme
    assert (repo / ".openoxide/plans/x.md").read_text() == "# Plan\n"
    assert not (repo / ".openoxide/plans/y.md").exists()
    assert re.search(r"Read-only file system|Permission denied", results["call_confined"])


def _codex_in_sandbox(
    codex: str, repo: Path, env: dict[str, str], script: Script, sandbox: str
) -> None:
    from .fake_models import FakeResponses
    from .host_runs import _run, ran_whole_script

    with FakeResponses(script) as api:
        proc = _run([codex, "exec", "--skip-git-repo-check", "-C", str(repo),
                     "-c", f'model_providers.fake.base_url="{api.url}/v1"',
                     "-c", f'sandbox_mode="{sandbox}"', "Plan it."], repo, env)
    ran_whole_script(script, "Codex", proc)


def test_guard_confine_stacks_inside_codex_read_only_sandbox(
    codex: str, project: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """``codex sandbox`` with the read-only profile and the plan directory writable: Codex
    mounts a read-only ``.git`` inside that writable root and its seccomp refuses new
    namespaces. guard confine recognises the mount, says which walls could not stack,
    runs on Landlock: the write to src/ fails, the plan file is written."""
    import subprocess

    repo, env = project
    plans = repo / ".openoxide/plans"
    plans.mkdir(parents=True, exist_ok=True)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**env, "TMPDIR": str(tmp)}  # Codex makes its helper only outside the temp dir
    src_before = snapshot(repo / "src")
    from guard.sandbox.direct import guard_program

    proc = subprocess.run(
        [codex, "sandbox", "-P", "plan", "-c", 'permissions.plan.extends=":read-only"',
         "-c", f'permissions.plan.filesystem={{"{plans}"="write", "{tmp}"="write"}}', "--",
         *guard_program(), "confine", "--", "bash", "-c",
         f"echo owned > src/app.py; echo '# Plan' > {plans}/z.md; exit 5"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 5, proc.stderr
    assert "Landlock-only fallback" in proc.stderr, proc.stderr
    assert re.search(r"Read-only file system|Permission denied", proc.stderr)
    assert snapshot(repo / "src") == src_before
    assert (plans / "z.md").read_text() == "# Plan\n"
