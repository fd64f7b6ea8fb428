"""Adding a host is one new folder under guard/hosts/ and one registry line: docs/hosts.md
("Adding a host") shows that diff for a made-up host, Acme Agent, and this test applies
exactly the files and the line the page shows to a copy of guard, then uses the new host
the way a user would: its hook decides a write and a read, ``guard install`` wires it,
and its settings file is protected."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "hosts.md"


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Adding a host")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _files() -> dict[str, str]:
    """The new folder's files, as the page shows them (a block's first line names it)."""
    found: dict[str, str] = {}
    for block in re.findall(r"```python\n(.*?)```", _section(), re.S):
        first, _, rest = block.partition("\n")
        assert first.startswith("# guard/hosts/acme_agent/"), first
        found[first[2:]] = rest
    return found


def _registry_line() -> str:
    [diff] = re.findall(r"```diff\n(.*?)```", _section(), re.S)
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and
             not line.startswith("+++")]
    assert len(added) == 1, added
    return added[0]


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """guard, with the page's diff applied."""
    root = tmp_path_factory.mktemp("with-acme")
    shutil.copytree(ROOT / "guard", root / "guard",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for rel, text in _files().items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    registry = root / "guard/hosts/__init__.py"
    text = registry.read_text(encoding="utf-8")
    anchor = '    "aider",\n'
    assert anchor in text
    registry.write_text(text.replace(anchor, anchor + _registry_line() + "\n", 1),
                        encoding="utf-8")
    return root


def _python(copy: Path, code: str, cwd: Path, home: Path, stdin: str = "") -> \
        subprocess.CompletedProcess[str]:
    """``code`` run with the copy first on the path (and proof that it is the copy)."""
    prelude = (f"import sys; sys.path.insert(0, {str(copy)!r}); import guard;"
               f" assert guard.__file__.startswith({str(copy)!r}), guard.__file__\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARD_", "XDG_"))}
    env.update(HOME=str(home), GUARD_HOOK_DAEMON="0")
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=cwd, env=env,
                          input=stdin, capture_output=True, text=True, timeout=120)


def test_the_page_shows_one_folder_and_one_registry_line() -> None:
    files = _files()
    assert set(files) == {"guard/hosts/acme_agent/__init__.py",
                          "guard/hosts/acme_agent/tool_table.py",
                          "guard/hosts/acme_agent/hook.py"}
    assert _registry_line().strip() == '"acme_agent",'


def test_the_new_host_is_in_every_list_and_decides_its_calls(copy: Path, tmp_path: Path) -> \
        None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home = tmp_path / "home"
    home.mkdir()
    lists = _python(copy, (
        "import json; from guard import hosts, analysis, decide\n"
        "print(json.dumps([hosts.HOOKED, analysis.DIALECTS, decide.PROTECTED_PATTERNS]))"
    ), repo, home)
    assert lists.returncode == 0, lists.stderr
    hooked, dialects, protected = json.loads(lists.stdout)
    assert "acme-agent" in hooked and "acme-agent" in dialects
    assert "/.acme/hooks.json" in protected

    def hook(tool: str, tool_input: dict[str, str]) -> dict[str, str]:
        payload = json.dumps({"session_id": "s1", "cwd": str(repo),
                              "tool": {"name": tool, "input": tool_input}})
        proc = _python(copy, (
            "from guard.hooks.__main__ import main\n"
            "raise SystemExit(main(['acme-agent', '--agent', 'plan']))"
        ), repo, home, payload)
        assert proc.returncode == 0, proc.stderr
        answer: dict[str, str] = json.loads(proc.stdout)
        return answer

    # the attack: a plan agent writing outside its plan file, through the new host
    wrote = hook("write", {"path": str(repo / "src/app.py")})
    assert wrote["decision"] == "deny" and "plan mode" in wrote["reason"]
    assert not (repo / "src/app.py").exists()
    assert hook("read", {"path": str(repo / "README.md")})["decision"] == "allow"
    shell = hook("shell", {"command": "echo pwned > src/app.py"})
    assert shell["decision"] == "deny", shell

    installed = _python(copy, (
        "from guard.setup.install import install\n"
        f"change = install('acme-agent', 'project', cwd={str(repo)!r})\n"
        "print(change.path)"
    ), repo, home)
    assert installed.returncode == 0, installed.stderr
    settings = json.loads((repo / ".acme/hooks.json").read_text(encoding="utf-8"))
    [group] = settings["hooks"]["pre_tool"]
    assert "acme-agent" in group["hooks"][0]["command"]
