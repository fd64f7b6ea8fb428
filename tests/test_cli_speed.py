"""Every everyday command imports only what it uses: each runs in a new process with
``-X importtime`` and the modules it loaded are checked against what it must not need
(timings are benchmarks/cli.py's; nothing here is timed).

A command that loads the lint catalog, the doctor, the policy schema or another
command's family pays for them on every call; this fails as soon as one creeps back.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard.cli._families import FAMILY_OF, SUMMARIES

# modules no everyday command needs unless it is that command's own job
LINT = "guard.lint.review"
DOCTOR = "guard.setup.doctor"
SCHEMA = "guard.policy.schema"
RICH_HELP = "typer.rich_utils"
MARKDOWN = "rich.markdown"
# what typer costs on its own, and the models no command that only reads needs
TYPER = {"typer", "click", "pydantic", "guard.cli._typer", "guard.cli._families"}
SESSION_MODEL = {"guard.planning.session", "guard.planning.event_bus",
                 "guard.planning.checklist"}

CASES: list[tuple[list[str], set[str]]] = [
    (["--help"], {LINT, DOCTOR, SCHEMA, "guard.cli.core", "guard.cli.planning",
                  "guard.planning", "guard.analysis", "guard.decide", *TYPER}),
    (["mode"], {LINT, DOCTOR, SCHEMA, RICH_HELP, MARKDOWN, "guard.cli.core", "guard.cli.hooks",
                "guard.cli.lint", "guard.ui.state", "rich", *TYPER, *SESSION_MODEL}),
    (["plan", "status"], {LINT, DOCTOR, SCHEMA, RICH_HELP, MARKDOWN, "guard.cli.core",
                          "guard.cli.lint", "guard.ui.state", "rich", *TYPER,
                          *SESSION_MODEL}),
    (["check", "write", "src/a.py"], {"typer", LINT, DOCTOR, "guard.planning.event_bus"}),
    (["explain", "write", "src/a.py"], {LINT, DOCTOR, SCHEMA, RICH_HELP, "guard.cli.planning",
                                        "guard.cli.hooks", "guard.planning", *TYPER}),
    (["lint", ".openoxide/policy.toml"], {"typer", DOCTOR, "guard.planning.event_bus"}),
    (["doctor"], {LINT, "guard.cli.lint", "guard.importers", RICH_HELP, MARKDOWN,
                  "guard.cli.planning", "typer", "click", "guard.cli._typer", "pydantic",
                  *SESSION_MODEL}),
    # every confined command pays this start: none of it is used before the command runs
    # (typing: annotations only, ~2 ms; the monitor imports it for itself)
    (["run", "--agent", "plan", "-q", "--no-monitor", "--", "true"],
     {"tempfile", "shutil", "random", "platformdirs", "tomllib", "hashlib", "_hashlib", "hmac",
      "pydantic", "rich", "typing", *TYPER}),
]
#: guard run with its monitor (on fanotify, as root): the monitor's start and stop load
#: none of this either (tempfile and its shutil, random, bz2 and lzma; OpenSSL's binding
#: through hashlib or hmac; datetime), nor watchdog (the inotify backend's)
MONITOR_UNUSED = {"tempfile", "shutil", "random", "bz2", "lzma", "hashlib", "_hashlib", "hmac",
                  "datetime", "_datetime", "watchdog", "platformdirs", "tomllib", "pydantic",
                  "rich", *TYPER}
#: with a session open (the second hour's state): what must still stay unloaded
OPEN_SESSION = {LINT, DOCTOR, SCHEMA, "typer", "click", "pydantic", *SESSION_MODEL}


@pytest.fixture
def workdir(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    (repo / ".openoxide").mkdir()
    (repo / ".openoxide/policy.toml").write_text(
        'version = 1\nextends = ["builtin:default"]\n', encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GUARD_", "XDG_")) and k != "PYTHONPATH"}
    env.update(HOME=str(home), NO_COLOR="1")
    # as on a machine where guard runs: a check (or a hook) keeps the validated policy, so
    # later commands on it start without pydantic
    subprocess.run([sys.executable, "-m", "guard", "check", "write", "src/a.py"], cwd=repo,
                   env=env, capture_output=True, timeout=120, check=False)
    return repo, env


def loaded(args: list[str], cwd: Path, env: dict[str, str]) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "guard", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300,
                          check=False)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    assert "guard" in names, proc.stderr[-2000:]
    return names


@pytest.mark.parametrize(("args", "unused"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_command_imports_only_what_it_uses(
    workdir: tuple[Path, dict[str, str]], args: list[str], unused: set[str]
) -> None:
    repo, env = workdir
    loaded(args, repo, env)  # first run: the validated-policy and bytecode caches
    names = loaded(args, repo, env)
    extra = sorted(m for m in names if any(m == u or m.startswith(u + ".") for u in unused))
    assert not extra, f"guard {' '.join(args)} imported modules it does not use: {extra}"


def test_guard_run_with_the_monitor_imports_only_what_it_uses(
    workdir: tuple[Path, dict[str, str]]
) -> None:
    """The monitor's whole life in ``guard run -- true`` (its baseline before the command,
    the second phase, the final reconciliation, the records) loads none of MONITOR_UNUSED."""
    from guard.monitor.fanotify import choose
    from tests.components import CI_RULE, in_ci

    repo, env = workdir
    choice = choose([repo], "fanotify")
    if choice.backend != "fanotify":  # inotify's watchdog loads tempfile itself
        message = f"fanotify is not available to this test process: {choice.why}"
        if in_ci():
            pytest.fail(f"{message} ({CI_RULE})", pytrace=False)
        pytest.skip(message)
    args = ["run", "--agent", "plan", "-q", "--", "true"]
    loaded(args, repo, env)
    names = loaded(args, repo, env)
    # the monitor ran, its second phase too (guard.monitor's own names are imported with
    # importlib, which -X importtime does not list)
    assert {"guard.monitor.fanotify", "guard.monitor.objsnap"} <= names
    extra = sorted(m for m in names if any(m == u or m.startswith(u + ".")
                                           for u in MONITOR_UNUSED))
    assert not extra, f"guard {' '.join(args)} imported modules it does not use: {extra}"


@pytest.mark.parametrize("start", [["session", "start", "--id", "s-1"],
                                   ["plan", "start", "Add caching"]], ids=["build", "plan"])
def test_mode_with_a_session_open_loads_no_session_model(
    workdir: tuple[Path, dict[str, str]], start: list[str]
) -> None:
    """``guard mode`` reads an open session's file without pydantic (the plain reader)."""
    repo, env = workdir
    subprocess.run([sys.executable, "-m", "guard", *start], cwd=repo, env=env,
                   capture_output=True, timeout=120, check=True)
    for args in (["mode"], ["mode", "-C", "."]):
        loaded(args, repo, env)
        names = loaded(args, repo, env)
        extra = sorted(m for m in names if any(m == u or m.startswith(u + ".")
                                               for u in OPEN_SESSION))
        assert not extra, f"guard {' '.join(args)} imported modules it does not use: {extra}"


def test_plan_status_with_a_plan_session_open_loads_no_model(
    workdir: tuple[Path, dict[str, str]]
) -> None:
    """``guard plan status`` reads the session, its plan file and its event log (checklist
    updates, decisions) without pydantic (guard/planning/status_view.py), and loads none of
    the planning modules it does not print from (answers, the exit handshake)."""
    from guard import effects
    from guard.planning import event_bus as ev
    from guard.planning.checklist import PlanItem, StepStatus
    from guard.planning.session import Session

    repo, env = workdir
    subprocess.run([sys.executable, "-m", "guard", "plan", "start", "Add caching"], cwd=repo,
                   env=env, capture_output=True, timeout=120, check=True)
    session = Session.list_all(repo)[0]
    Path(session.plan_path or "").write_text("# Add caching\n", encoding="utf-8")
    session.publish(ev.PlanUpdate(plan=[PlanItem(step="cache", status=StepStatus.PENDING)]))
    decided = effects.Decision(effects.Action.DENY, "plan mode", "builtin:default:1")
    session.publish(ev.Decision.from_decision(decided, agent="plan", tool="Write"))
    unused = {*OPEN_SESSION, "guard.planning.answer", "guard.planning.handshake",
              "guard.planning.todos"}
    for args in (["plan", "status"], ["plan", "status", "--json"]):
        loaded(args, repo, env)
        names = loaded(args, repo, env)
        assert "guard.planning.status_view" in names, args  # the session was read
        extra = sorted(m for m in names if any(m == u or m.startswith(u + ".") for u in unused))
        assert not extra, f"guard {' '.join(args)} imported modules it does not use: {extra}"


def test_every_command_is_found_in_its_family() -> None:
    """FAMILY_OF names each command of the whole application, with the family defining it."""
    from typer.main import get_command_name

    from guard.cli._app import app

    def name_of(c: object) -> str | None:
        given = getattr(c, "name", None)
        callback = getattr(c, "callback", None)
        return given or (get_command_name(callback.__name__) if callback else None)

    names = [name_of(c) for c in app.registered_commands] + [
        g.name or (g.typer_instance.info.name if g.typer_instance else None)
        for g in app.registered_groups]
    assert sorted(n for n in names if n) == sorted(FAMILY_OF)
    for name, loader in FAMILY_OF.items():
        families = loader()
        found = [name_of(c) for f in families for c in f.registered_commands] + [
            g.name for f in families for g in f.registered_groups]
        assert name in found, f"{name} is not defined by the family FAMILY_OF gives"
    assert [n for n, _ in SUMMARIES] == [n for n in names if n]


@pytest.mark.parametrize(("columns", "color"),
                         [("120", "never"), ("80", "never"), ("80", "always"), ("50", "always"),
                          ("44", "never"), ("30", "never")])
def test_guard_help_lists_what_the_whole_application_lists(
    workdir: tuple[Path, dict[str, str]], columns: str, color: str
) -> None:
    """``guard --help`` (printed without typer: guard/cli/root_help.py) is byte for byte
    typer's help of the whole application, at any width, in colour or not."""
    repo, env = workdir
    env = {**env, "COLUMNS": columns}
    quick = subprocess.run([sys.executable, "-m", "guard", "--color", color, "--help"],
                           capture_output=True, text=True, cwd=repo, env=env, timeout=120,
                           check=True)
    whole = subprocess.run(
        [sys.executable, "-c", "from guard.cli._base import ColorMode\n"
         "from guard.cli._typer import run_typer, set_color\n"
         "from guard.cli._app import app\n"
         f"set_color(ColorMode({color!r}))\n"
         "run_typer(app, ['--help'], prog='guard', as_json=False)"],
        capture_output=True, text=True, cwd=repo, env=env, timeout=120, check=False)
    assert quick.stdout == whole.stdout
    assert "uninstall" in quick.stdout
    assert ("\x1b[" in quick.stdout) == (color == "always")


@pytest.mark.parametrize(
    ("words", "cword", "offered"),
    [
        ("guard install c", "2", {"claude-code", "codex", "cursor"}),
        ("guard check --agent ", "3", {"plan", "build"}),
        ("guard lint --explain GL10", "3", {"GL101", "GL107"}),
        ("guard che", "1", {"check"}),
    ],
)
def test_tab_offers_values(
    workdir: tuple[Path, dict[str, str]], words: str, cword: str, offered: set[str]
) -> None:
    """A new user's TAB: hosts, the policy's agents, rule codes, command names."""
    repo, env = workdir
    env = {**env, "_GUARD_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": cword}
    proc = subprocess.run([sys.executable, "-m", "guard"], capture_output=True, text=True,
                          cwd=repo, env=env, timeout=120, check=False)
    assert offered <= set(proc.stdout.split()), proc.stdout + proc.stderr


def test_tab_offers_this_worktrees_sessions(workdir: tuple[Path, dict[str, str]]) -> None:
    repo, env = workdir
    subprocess.run([sys.executable, "-m", "guard", "session", "start", "--id", "s-tab"],
                   cwd=repo, env=env, capture_output=True, timeout=120, check=True)
    env = {**env, "_GUARD_COMPLETE": "complete_bash", "COMP_WORDS": "guard mode --session s-",
           "COMP_CWORD": "3"}
    proc = subprocess.run([sys.executable, "-m", "guard"], capture_output=True, text=True,
                          cwd=repo, env=env, timeout=120, check=False)
    assert proc.stdout.split() == ["s-tab"], proc.stdout + proc.stderr


@pytest.mark.parametrize(("words", "cword"), [("guard install c", "2"),
                                              ("guard check --agent ", "3"),
                                              ("guard lint --explain GL10", "3")])
def test_a_tab_imports_no_typing_shlex_or_toml_parser(
    tmp_path: Path, words: str, cword: str
) -> None:
    """A TAB in a worktree on the built-in policy: the table answers, and what python -c
    pass does not load stays unloaded (typing, shlex, tomllib: a third of a TAB's time)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=60)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARD_", "XDG_"))}
    env.update(_GUARD_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=cword)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "guard"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
                          check=False)
    assert proc.returncode == 0 and proc.stdout.split(), proc.stderr[-2000:]
    names = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:") and "|" in line}
    assert "guard.cli.completion" in names
    assert not names & {"typing", "shlex", "tomllib", "typer", "click"}, sorted(names)
