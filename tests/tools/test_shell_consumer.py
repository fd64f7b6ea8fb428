"""Guard decides on exactly what bash will read, or refuses (issue 26, the shell half).

Each attack is a command that tree-sitter-bash and bash read differently. It is run
for real with bash in a scratch repository first (the attack works: it creates
``pwned``), then decided by the shipped plan agent (it is refused), through the
analyser and through the real hook processes of the analysis-only hosts (Codex and
Cursor dialects), as root and as uid 65534.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard.decide import Guard
from guard.tools import effects_for
from guard.tools.shell.walker import unsafe_text
from tests.sandbox.unprivileged import (
    USERS,
    as_user,
    chown_tree,
    reachable_dir,
    require_unprivileged,
)

#: (attack, command): each creates ``pwned`` when bash runs it, and the parser alone
#: would have seen nothing but a read
BYTE_ATTACKS = [
    ("vertical tab before # hides a command from the parser", "ls\v#; touch pwned"),
    ("form feed before # hides a command from the parser", "ls\f#; touch pwned"),
    ("carriage return before # hides a command from the parser", "ls\r#; touch pwned"),
    ("backslash CR LF is no line continuation for bash", "echo \\\r\ntouch pwned"),
    ("escaped space then # (printable ASCII only)", "ls \\ #; touch pwned"),
    ("escaped tab then #", "ls \\\t#; touch pwned"),
    ("escaped space starts an assigned value", "x=\\ #; touch pwned"),
    ("a stray $ glued to a sed script", "sed -e 'a\\'$ -e 'w pwned' README.md"),
]

#: commands that must stay allowed: the same characters where both readers agree
BENIGN = ["cat my\\ file", "ls a\\\\ b", "echo 'a\\ b'", "ls \\\n  -la", "grep -n 'foo$' README.md",
          'grep "foo$" README.md', "echo café", "printf '%s\\t%s\\n' a b"]


def _scratch(base: Path) -> Path:
    repo = base / "repo"
    (repo / ".openoxide" / "plans").mkdir(parents=True)
    (repo / "README.md").write_text("# demo\n")
    (repo / "my file").write_text("x\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def _plan(repo: Path, command: str) -> str:
    g = Guard.load("builtin:default", worktree=repo)
    effects = effects_for("claude-code", "Bash", {"command": command}, str(repo))
    return g.decide("plan", effects, repo).action.value


@pytest.mark.parametrize(("attack", "command"), BYTE_ATTACKS, ids=[a for a, _ in BYTE_ATTACKS])
def test_bytes_bash_reads_differently_are_refused(attack: str, command: str,
                                                  tmp_path: Path) -> None:
    """Attack: hide a command behind bytes the parser skips and bash does not."""
    repo = _scratch(tmp_path)
    subprocess.run(["bash", "--norc", "-c", command], cwd=repo, capture_output=True, check=False,
                   timeout=60)
    assert (repo / "pwned").exists(), f"{attack}: the attack does not work in bash"
    (repo / "pwned").unlink()
    assert _plan(repo, command) == "deny", attack


@pytest.mark.parametrize("command", BENIGN)
def test_characters_both_readers_agree_on_stay_allowed(command: str, tmp_path: Path) -> None:
    assert _plan(_scratch(tmp_path), command) == "allow"


@pytest.mark.parametrize("text", [
    "ls\x00", "ls\x1b[0m", "ls\x7f", "ls \u00a0#", "ls \u2028x", "ls \ufeff", "ls \udc80",
    "ls \ud800", "echo \\\u00e9", "echo \\", "ls \x85x",
])
def test_unsafe_text_names_the_character(text: str) -> None:
    why = unsafe_text(text)
    assert why is not None and "character" in why


def test_safe_text_is_not_refused() -> None:
    for text in BENIGN:
        assert unsafe_text(text) is None, text


def _hook(user: str, host: str, payload: dict[str, object], home: Path) -> dict[str, object]:
    argv = as_user(user, [sys.executable, "-I", "-m", "guard.integrations", host,
                          "--agent", "plan"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARD_", "XDG_"))}
    env.update(HOME=str(home), GUARD_HOOK_DAEMON="0")
    proc = subprocess.run(argv, input=json.dumps(payload), capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.strip(), (proc.returncode, proc.stderr)
    out: dict[str, object] = json.loads(proc.stdout)
    return out


@pytest.mark.parametrize("user", USERS)
def test_hooks_of_analysis_only_hosts_deny_every_byte_attack(user: str) -> None:
    """Attack: the same commands through the real hook process of Codex (``Bash`` payload)
    and Cursor (``beforeShellExecution``): each gets a deny answer, never silence."""
    if user != "root":
        require_unprivileged()
    base = reachable_dir("guard-consumer-", user)
    try:
        repo = _scratch(base)
        home = base / "home"
        home.mkdir()
        chown_tree(base, user)
        for attack, command in BYTE_ATTACKS:
            codex = {"session_id": "s-1", "turn_id": "t-1", "transcript_path": str(base / "t"),
                     "cwd": str(repo), "hook_event_name": "PreToolUse", "model": "gpt-5.5",
                     "permission_mode": "bypassPermissions", "tool_name": "Bash",
                     "tool_input": {"command": command}, "tool_use_id": "call_1"}
            out = _hook(user, "codex", codex, home)
            spec = out["hookSpecificOutput"]
            assert isinstance(spec, dict) and spec["permissionDecision"] == "deny", (attack, out)
            cursor = {"conversation_id": "c-1", "generation_id": "g-1",
                      "hook_event_name": "beforeShellExecution", "workspace_roots": [str(repo)],
                      "command": command, "cwd": str(repo)}
            out = _hook(user, "cursor", cursor, home)
            assert out["permission"] == "deny", (attack, out)
            assert not (repo / "pwned").exists()
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


#: sed scripts that write ``pwned`` (or run ``touch pwned``) in GNU sed, each read by a
#: reader that splits at delimiters naively or takes a/i/c text too far
SED_ATTACKS = [
    ("a bracket expression hides the delimiter before an e flag", "s/[/]/touch pwned #/e"),
    ("an escaped backslash before the delimiter, then e", "s/\\\\/touch pwned/e"),
    ("an escaped delimiter in the pattern, then w", "s/\\//X/w pwned"),
    ("flags then a comment, then w on the next line", "s/a/b/g#c\nw pwned"),
    ("another delimiter, then w", "s|a|b|w pwned"),
    ("a w command after a block", "/x/{p};w pwned"),
    ("a text command at the end of one -e and w in the next", "a\\$\nw pwned"),
    ("y then w", "y/ab/cd/;w pwned"),
    ("e command", "1e touch pwned"),
    ("W command", "W pwned"),
    ("an address bracket expression hides the delimiter", "/[/]/w pwned"),
]


@pytest.mark.parametrize(("attack", "script"), SED_ATTACKS, ids=[a for a, _ in SED_ATTACKS])
def test_sed_scripts_are_read_with_seds_grammar(attack: str, script: str,
                                                tmp_path: Path) -> None:
    """Attack: a sed script that writes or runs a command once sed reads it."""
    repo = _scratch(tmp_path)
    (repo / "in.txt").write_text("/\n\\\n")
    argv = ["sed"]
    for part in script.split("\n"):
        argv += ["-e", part]
    subprocess.run([*argv, "in.txt"], cwd=repo, capture_output=True, check=False, timeout=60)
    assert (repo / "pwned").exists(), f"{attack}: the attack does not work in GNU sed"
    (repo / "pwned").unlink()
    command = " ".join(f"-e '{p}'" for p in script.split("\n"))
    assert _plan(repo, f"sed {command} in.txt") == "deny", attack


SED_READERS = ["1,20p", "s/a/b/g", "s/\\//X/", "s|a|b|gI", "$!N;P;D", "/foo/,+3{s/a/b/;p}",
               "a hello", ":a;N;$!ba;s/\\n/ /g", "y/abc/xyz/", "1~2d", "0,/re/d", "s/x/y/3g#c",
               "/x/I,/y/Mp", "l 40", "2q", "s/[ab]/X/", "s/[\\]/X/", "=", "s/a/b/;# e w r"]


@pytest.mark.parametrize("script", SED_READERS)
def test_sed_scripts_that_only_print_stay_allowed(script: str, tmp_path: Path) -> None:
    """What guard accepts is a script GNU sed accepts in --sandbox mode (no e, w, r)."""
    repo = _scratch(tmp_path)
    (repo / "in.txt").write_text("a/b\nfoo\n")
    proc = subprocess.run(["sed", "--sandbox", "-e", script, "in.txt"], cwd=repo,
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    quoted = "'" + script.replace("'", "'\\''") + "'"
    assert _plan(repo, f"sed -e {quoted} in.txt") == "allow"
