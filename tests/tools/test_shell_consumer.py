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

from guard.analysis import effects_for
from guard.analysis.shell.walker import unsafe_text
from guard.decide import Guard
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


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARD_", "XDG_"))}
    env.update(HOME=str(home), GUARD_HOOK_DAEMON="0", CODEX_HOME=str(home / ".codex"))
    return env


def _installed(repo: Path, home: Path, host: str, settings: str, event: str) -> str:
    """``guard install HOST --agent plan`` in ``repo``: the hook command the host will run."""
    guard = [sys.executable, "-I", "-m", "guard", "install", host, "--project", "--agent", "plan"]
    subprocess.run(guard, cwd=repo, env=_env(home), check=True, capture_output=True, timeout=120)
    data = json.loads((repo / settings).read_text())
    found = []
    for entry in data["hooks"][event]:
        for h in entry.get("hooks", [entry]):
            if "_client.py" in h.get("command", ""):
                found.append(h["command"])
    assert len(found) == 1, data
    return str(found[0])


def _run_hook(user: str, command: str, payload: dict[str, object], repo: Path,
              home: Path) -> dict[str, object]:
    """Run an installed hook command as the host does (``sh -c``, payload on stdin)."""
    proc = subprocess.run(as_user(user, ["sh", "-c", command]), input=json.dumps(payload),
                          capture_output=True, text=True, env=_env(home), cwd=repo,
                          timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.strip(), (proc.returncode, proc.stderr)
    out: dict[str, object] = json.loads(proc.stdout)
    return out


REPRODUCTIONS = [*BYTE_ATTACKS[:5], ("git status rewrites the index", "git status")]


@pytest.mark.parametrize("user", USERS)
def test_installed_hooks_of_analysis_only_hosts_deny_the_reproductions(user: str) -> None:
    """Attack: the issue's reproductions through the hooks ``guard install`` wrote for
    Codex (a ``Bash`` PreToolUse payload) and Cursor (``beforeShellExecution``), run
    as the host runs them: each gets a deny answer, never silence."""
    if user != "root":
        require_unprivileged()
    base = reachable_dir("guard-consumer-", user)
    try:
        repo = _scratch(base)
        home = base / "home"
        home.mkdir()
        codex_hook = _installed(repo, home, "codex", ".codex/hooks.json", "PreToolUse")
        cursor_hook = _installed(repo, home, "cursor", ".cursor/hooks.json",
                                 "beforeShellExecution")
        chown_tree(base, user)
        for attack, command in REPRODUCTIONS:
            codex = {"session_id": "s-1", "turn_id": "t-1", "transcript_path": str(base / "t"),
                     "cwd": str(repo), "hook_event_name": "PreToolUse", "model": "gpt-5.5",
                     "permission_mode": "bypassPermissions", "tool_name": "Bash",
                     "tool_input": {"command": command}, "tool_use_id": "call_1"}
            out = _run_hook(user, codex_hook, codex, repo, home)
            spec = out["hookSpecificOutput"]
            assert isinstance(spec, dict) and spec["permissionDecision"] == "deny", (attack, out)
            cursor = {"conversation_id": "c-1", "generation_id": "g-1",
                      "hook_event_name": "beforeShellExecution", "workspace_roots": [str(repo)],
                      "command": command, "cwd": str(repo)}
            out = _run_hook(user, cursor_hook, cursor, repo, home)
            assert out["permission"] == "deny", (attack, out)
        readonly = {**codex, "tool_input": {"command": "git --no-optional-locks status"}}
        proc = subprocess.run(as_user(user, ["sh", "-c", codex_hook]),
                              input=json.dumps(readonly), capture_output=True, text=True,
                              env=_env(home), cwd=repo, timeout=120, check=False)
        assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr  # Codex: allow is silence
        assert not (repo / "pwned").exists()
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


@pytest.mark.parametrize(("attack", "command"), REPRODUCTIONS, ids=[a for a, _ in REPRODUCTIONS])
@pytest.mark.parametrize("dialect", ["codex", "claude-code"])
def test_guard_check_denies_the_reproductions(attack: str, command: str, dialect: str,
                                              tmp_path: Path) -> None:
    repo = _scratch(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "check", "--agent", "plan", "--dialect", dialect,
         "--tool", "Bash", "--input", json.dumps({"command": command}), "--json"],
        cwd=repo, env=_env(tmp_path), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0, (attack, proc.stdout)
    assert json.loads(proc.stdout)["decision"] == "deny", (attack, proc.stdout)


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


#: constructs where bash evaluates text as code at run time, each creating ``pwned``
RUNTIME_ATTACKS = [
    ("PS4 with set -x traces a [[ ]]", "PS4='$(touch pwned)'; set -x; [[ 1 ]]"),
    ("exported PS4 traces an assignment", "export PS4='$(touch pwned)'; set -x; x=1"),
    ("PS4 traces a case", "PS4='$(touch pwned)'; set -x; case a in a) x=1;; esac"),
    ("declare PS4", "declare PS4='$(touch pwned)'; set -x; [[ 1 ]]"),
    ("PS4 assigned inside [[ ]]", "unset PS4; [[ ${PS4:='$(touch pwned)'} ]]; set -x; x=1"),
    ("PS4 read from a here-string", "read -r PS4 <<< '$(touch pwned)'; set -x; [[ 1 ]]"),
    ("PS4 as a for variable", "for PS4 in '$(touch pwned)'; do set -x; [[ 1 ]]; done"),
    ("PS4 inside a case arm", "case a in a) PS4='$(touch pwned)';; esac; set -o xtrace; [[ 1 ]]"),
    ("BASH_ENV for a nested bash", "BASH_ENV=evil.sh bash -c true"),
    ("a function imported through the environment",
     "env 'BASH_FUNC_true%%=() { touch pwned; }' bash -c true"),
    ("prompt expansion of a value", "x='$(touch pwned)'; echo \"${x@P}\""),
    ("a tab-indented heredoc body", "cat <<-EOF\n\t$(touch pwned)\n\tEOF"),
    ("a tab-indented heredoc body, end unindented", "cat <<-EOF\n\t`touch pwned`\nEOF"),
    ("a <<- delimiter line the body seems to hold", "cat <<-EOF\n\tEOF\ntouch pwned\nEOF"),
]


@pytest.mark.parametrize(("attack", "command"), RUNTIME_ATTACKS,
                         ids=[a for a, _ in RUNTIME_ATTACKS])
def test_text_bash_evaluates_at_run_time_is_code(attack: str, command: str,
                                                 tmp_path: Path) -> None:
    """Attack: hide a command in a value or body that bash evaluates later."""
    repo = _scratch(tmp_path)
    (repo / "evil.sh").write_text("touch pwned\n")
    subprocess.run(["bash", "--norc", "-c", command], cwd=repo, capture_output=True,
                   check=False, timeout=60, stdin=subprocess.DEVNULL)
    assert (repo / "pwned").exists(), f"{attack}: the attack does not work in bash"
    (repo / "pwned").unlink()
    assert _plan(repo, command) == "deny", attack


@pytest.mark.parametrize("command", [
    "cat <<EOF\nhello $USER\nEOF", "cat <<-EOF\n\thello\n\tEOF", "cat <<'EOF'\n$(x) `y`\nEOF",
    "cat <<EOF\n$(ls)\nEOF", "set -x; ls", "echo ${x@Q}", "for f in a b; do echo $f; done",
])
def test_heredocs_and_expansions_bash_reads_alike_stay_allowed(command: str,
                                                               tmp_path: Path) -> None:
    assert _plan(_scratch(tmp_path), command) == "allow"


@pytest.mark.parametrize("command", [
    ": ${PS4:=x}", ": ${PROMPT_COMMAND=x}", "export BASH_ENV=f", "typeset -x PS1=x",
    "printf -v PS4 %s x", "mapfile -t PS3 < README.md", "getopts a PS4", "local ENV=x",
    "SHELLOPTS=xtrace bash -c true", "env BASHOPTS=x bash -c true", "command export PS4=x",
])
def test_every_way_to_set_a_variable_bash_evaluates_is_refused(command: str,
                                                               tmp_path: Path) -> None:
    assert _plan(_scratch(tmp_path), command) == "deny", command


def test_jq_modules_are_reads_the_operands_do_not_name(tmp_path: Path) -> None:
    """Attack: jq's own grammar reads files that are no operand: `import "lib/secret" as
    $s;` prints lib/secret.json (a path the read rules never saw)."""
    repo = _scratch(tmp_path)
    (repo / "lib").mkdir()
    (repo / "lib" / "secret.json").write_text('{"token": "s3cret"}\n')
    command = "jq -n 'import \"lib/secret\" as $s; $s'"
    proc = subprocess.run(["bash", "-c", command], cwd=repo, capture_output=True, text=True,
                          check=False, timeout=60)
    assert "s3cret" in proc.stdout, proc.stderr
    effects = effects_for("claude-code", "Bash", {"command": command}, str(repo))
    assert any(e.kind.value == "read" and e.target is None for e in effects), effects
    assert _plan(repo, command) != "allow"
    assert _plan(repo, "jq -r '.token' lib/secret.json") == "allow"


def test_security_md_states_the_rule_for_the_shell_analysis() -> None:
    text = (Path(__file__).parents[2] / "SECURITY.md").read_text(encoding="utf-8")
    section = text.split("### Tool-call analysis", 1)[1].split("\n### ", 1)[0]
    assert "guard decides on exactly what the consumer will read, or refuses." in section
