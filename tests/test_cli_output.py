"""One output convention, tried as a new user would: real `guard` processes in a real git
repository (exit codes as shells give them, quiet meaning quiet, a verdict first)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def guard(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "guard", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300, check=False)


def test_a_program_that_cannot_be_found_exits_127_in_one_line(repo: Path) -> None:
    for argv in (["no-such-program-xyz"], ["./missing.sh"]):
        proc = guard("run", "-q", "--", *argv, cwd=repo)
        assert proc.returncode == 127, proc.stderr
        assert proc.stderr.count("\n") == 1 and "not found" in proc.stderr, proc.stderr


def test_a_program_that_is_not_executable_exits_126(repo: Path) -> None:
    (repo / "notes.sh").write_text("echo hi\n")  # no x bit
    proc = guard("run", "-q", "--", "./notes.sh", cwd=repo)
    assert proc.returncode == 126, proc.stderr
    assert proc.stderr.count("\n") == 1 and "cannot run" in proc.stderr, proc.stderr


def test_quiet_run_prints_nothing_when_nothing_is_wrong(repo: Path) -> None:
    (repo / ".gitignore").write_text("build/\n")
    (repo / "build").mkdir()
    (repo / "build/out.txt").write_text("x\n")  # ignored by git: not restorable, not a warning
    proc = guard("run", "-q", "--agent", "plan", "--", "true", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    # no information: what was set up, scanned, or cannot be undone without --restore (a
    # warning the busy machine may cause, e.g. a directory removed mid-walk, may remain)
    for info in ("(final) scanned", "never copied", "baseline hashing",
                 "object database snapshot"):
        assert info not in proc.stderr, proc.stderr


def test_doctor_starts_with_one_verdict_line_and_folds_hosts_that_are_off(repo: Path) -> None:
    proc = guard("doctor", cwd=repo)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("guard doctor: "), proc.stdout
    assert "no host is wired here" in lines[0]
    off = [line for line in lines if line.startswith("not wired here (off):")]
    assert len(off) == 1 and "claude-code (project)" in off[0]
    assert "│ claude-code" not in proc.stdout  # an off host takes no table row
    doc = json.loads(guard("doctor", "--json", cwd=repo).stdout)
    assert doc["schema_version"] == 1 and doc["verdict"] == lines[0].split(": ", 1)[1]


def test_the_plan_mode_paragraph_only_where_a_change_is_refused(repo: Path) -> None:
    home = Path(os.path.expanduser("~"))
    read = guard("check", "read", str(home / ".ssh/id_rsa"), cwd=repo)
    assert read.returncode != 0 and "plan mode" not in read.stdout, read.stdout
    write = guard("check", "write", "src/app.py", cwd=repo)
    assert write.returncode == 1 and "You are in plan mode" in write.stdout
    # a tool plan mode asks about (a web fetch) is no refusal of a change
    fetch = guard("check", "--dialect", "claude-code", "--tool", "WebFetch", "--input",
                  '{"url": "https://example.com/"}', cwd=repo)
    assert fetch.returncode == 3 and "plan mode" not in fetch.stdout, fetch.stdout
    # a tool plan mode does not offer is
    todo = guard("check", "--dialect", "claude-code", "--tool", "TodoWrite", "--input",
                 '{"todos": []}', cwd=repo)
    assert todo.returncode == 1 and "You are in plan mode" in todo.stdout, todo.stdout


def test_cwd_is_dash_c_on_every_command_that_takes_it(repo: Path) -> None:
    sub = repo / "src"
    for args in (["check", "-C", str(sub), "write", "app.py"],
                 ["explain", "-C", str(sub), "write", "app.py"]):
        proc = guard(*args, cwd=repo.parent)
        assert "src/app.py" in proc.stdout, (args, proc.stdout, proc.stderr)
    proc = guard("effects", "--dialect", "claude-code", "--tool", "Bash", "-C", str(sub),
                 "--input", '{"command": "rm app.py"}', cwd=repo.parent)
    assert proc.returncode == 0, proc.stderr
    for command in ("check", "explain", "effects", "replay", "mode", "ui", "mcp"):
        text = guard(command, "--help", cwd=repo).stdout
        assert "-C" in text and "--cwd" in text, command


def test_policy_show_prints_the_line_explain_cites(repo: Path) -> None:
    explained = guard("explain", "--agent", "build", "delete", "src/app.py", cwd=repo).stdout
    cited = next(w for w in explained.split() if w.startswith("builtin:default:"))
    line = int(cited.split(":")[2].rstrip(":"))
    shown = guard("policy", "show", "default", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    numbered = dict(row.strip().split("  ", 1) for row in shown.stdout.splitlines()
                    if row.strip() and "  " in row.strip())
    assert str(line) in numbered
    plain = guard("policy", "show", "builtin:default", "--plain", cwd=repo).stdout
    assert plain.splitlines()[line - 1] == numbered[str(line)]
    bad = guard("policy", "show", "defualt", cwd=repo)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "default" in bad.stderr


REPO = Path(__file__).resolve().parents[1]


def test_review_transcripts_agree_with_replay_at_the_same_cwd(tmp_path: Path) -> None:
    """`guard review --transcripts T --cwd DIR` counts what `guard replay T --cwd DIR` does."""
    examples = str(REPO / "examples/replay")
    replay = guard("replay", examples, "--cwd", str(REPO), "--json", cwd=tmp_path)
    summary = json.loads(replay.stdout)["summary"]
    review = guard("review", "--transcripts", examples, "-C", str(REPO), "--format", "json",
                   cwd=tmp_path)
    assert review.stdout, review.stderr
    replayed = json.loads(review.stdout)["transcripts"]
    for key in ("calls", "denied", "asked", "allowed"):
        assert replayed[key] == summary[key], (key, replayed, summary)
