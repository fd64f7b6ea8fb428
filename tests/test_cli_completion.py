"""TAB completion answers before typer loads (guard/cli/completion.py), from a table
(guard/cli/completion.json) that must offer exactly what typer's application knows.

The table is written from typer's application (``python tests/test_cli_completion.py``
rewrites it); the tests here fail as soon as a command, an option or a value source
exists on one side only, compare the completer's answers with typer's own for every
command and option, and drive the protocol of the scripts ``guard --install-completion``
installs (bash, zsh, fish), through a real bash where one is found. Timings are
benchmarks/cli.py's; nothing here is timed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guard.cli import completion

TABLE = Path(__file__).resolve().parents[1] / "guard" / "cli" / "completion.json"


# -- the table, from typer's application --------------------------------------------------


def _source(param: Any) -> str | tuple[str, ...] | None:
    """What a parameter's value completes from: a source of completion.SOURCES, a tuple of
    choices, or None (free text, a path: the shell's own file completion)."""
    custom = getattr(param, "_custom_shell_complete", None)
    if custom is not None:
        funcs = [getattr(c.cell_contents, "__wrapped__", c.cell_contents)
                 for c in (custom.__closure__ or ()) if callable(c.cell_contents)]
        for name, func in completion.SOURCES.items():
            if any(f is func for f in funcs):
                return name
        raise AssertionError(f"{param.name}: a completion function completion.SOURCES lacks")
    from typer.main import get_command

    ctx = get_command(_app()).make_context("guard", [], resilient_parsing=True)
    found = [item.value for item in param.shell_complete(ctx, "")]
    return tuple(found) if found else None


def _app() -> Any:
    from guard.cli._app import app

    return app


def _plain(text: str | None) -> str:
    from rich.text import Text

    return " ".join(Text.from_markup(text or "").plain.split())


def build_table() -> dict[str, Any]:
    """Every command path of typer's application: its short help, subcommands, options
    (names, takes a value, may repeat, value source, help) and arguments (nargs, source)."""
    from typer.main import get_command

    out: dict[str, Any] = {}

    def walk(cmd: Any, ctx: Any, path: str) -> None:
        options, arguments = [], []
        for p in cmd.get_params(ctx):
            if getattr(p, "hidden", False):
                continue
            if p.param_type_name == "argument":
                arguments.append((p.nargs, _source(p)))
                continue
            takes = not (p.is_flag or p.count)
            # long names first (the order of a context's help option names varies)
            names = sorted([*p.opts, *p.secondary_opts], key=lambda n: not n.startswith("--"))
            options.append((tuple(names), takes,
                            bool(p.multiple), _source(p) if takes else None, _plain(p.help)))
        subs = {n: c for n, c in (getattr(cmd, "commands", None) or {}).items()
                if not c.hidden}
        out[path] = (_plain(cmd.get_short_help_str(limit=45)) if path else "",
                     tuple(subs), tuple(options), tuple(arguments))
        for name, sub in subs.items():
            walk(sub, sub.make_context(name, [], parent=ctx, resilient_parsing=True),
                 f"{path} {name}".strip())

    root = get_command(_app())
    walk(root, root.make_context("guard", [], resilient_parsing=True), "")
    return out


def table_text() -> str:
    """The table as guard/cli/completion.json holds it: the hosts, the lint rule codes, and
    the commands, one command path a line."""
    from guard.decide import Guard
    from guard.hooks import HOSTS
    from guard.lint import RULES
    from guard.policy.loader import builtin_names

    rows = [f"    {json.dumps(path)}: {json.dumps(entry)}"
            for path, entry in build_table().items()]
    agents = {name: list(Guard.load(f"builtin:{name}").agent_names) for name in builtin_names()}
    return (f'{{\n  "hosts": {json.dumps(list(HOSTS))},\n'
            f'  "rules": {json.dumps(sorted(RULES))},\n'
            f'  "builtin_agents": {json.dumps(agents)},\n'
            '  "commands": {\n' + ",\n".join(rows) + "\n  }\n}\n")


if __name__ == "__main__":
    TABLE.write_text(table_text(), encoding="utf-8")
    print(f"wrote {TABLE}")


# -- the table is typer's application -------------------------------------------------------


def test_the_table_is_written_from_typers_application() -> None:
    """Every command, option and value source typer knows is in the table, and nothing
    else (rewrite it with `python tests/test_cli_completion.py`)."""
    assert TABLE.read_text(encoding="utf-8") == table_text(), (
        "guard/cli/completion.json is stale: run `python tests/test_cli_completion.py`")


def test_the_static_values_are_guards() -> None:
    from guard.hooks import HOSTS
    from guard.lint import RULES
    from guard.policy.loader import builtin_names

    assert completion.hosts("") == list(HOSTS)
    assert completion.rule_codes("") == sorted(RULES)
    assert completion.policies("") == builtin_names()
    from guard.paths import VCS_MARKERS

    assert completion._VCS_MARKERS == VCS_MARKERS


def test_sessions_are_this_worktrees_and_the_data_dirs(repo: Path, tmp_path: Path) -> None:
    from guard.planning.session import Mode, Session

    Session.start(repo, Mode.BUILD, id="s-here")
    (repo / "src").mkdir(exist_ok=True)
    os.chdir(repo / "src")
    assert completion.sessions("s-") == ["s-here"]
    outside = tmp_path / "outside"  # no version control: the data directory's sessions
    outside.mkdir()
    Session.start(outside, Mode.BUILD, id="s-away")
    os.chdir(outside)
    assert completion.sessions("") == ["s-away"]


@pytest.mark.parametrize(
    "policy",
    [None, 'version = 1\nextends = ["builtin:default"]\n[agents.review]\nmode = "plan"\n'
           'default = "deny"\n',
     'version = 1\n[agents.solo]\nmode = "build"\ndefault = "allow"\n'],
)
def test_agents_are_the_policys_agents(repo: Path, policy: str | None) -> None:
    from guard.decide import Guard

    if policy is not None:
        (repo / ".openoxide" / "policy.toml").write_text(policy)
    assert completion.agents("") == list(Guard.load(cwd=repo).agent_names)
    (repo / ".openoxide" / "policy.toml").write_text("version = [")
    assert completion.agents("") == []  # a broken policy offers nothing


# -- the same answers as typer's completion ----------------------------------------------


def _probes() -> Iterator[str]:
    """Command lines (before the cursor) covering every command, option and value."""
    table = json.loads(TABLE.read_text(encoding="utf-8"))["commands"]
    for path, (_, subs, options, arguments) in table.items():
        head = f"guard {path} ".replace("  ", " ")
        yield head
        yield head + "-"
        yield head + "--"
        for sub in subs:
            yield head + sub[:2]
        for names, takes, _, _, _ in options:
            if takes:
                yield head + names[0] + " "
                if names[0].startswith("--"):
                    yield head + names[0] + "="
        if arguments and subs == []:
            yield head + "x "  # the second argument, if any


PROBES = list(_probes())


def _typer_says(
    capsys: pytest.CaptureFixture[str], env: dict[str, str], command: Any
) -> tuple[str, int]:
    old = dict(os.environ)
    os.environ.update(env)
    try:
        with pytest.raises(SystemExit) as done:
            command.main(args=[], prog_name="guard")
    finally:
        os.environ.clear()
        os.environ.update(old)
    return capsys.readouterr().out, int(done.value.code or 0)


def _env(shell: str, line: str) -> dict[str, str]:
    if shell == "bash":
        words = line.split(" ")
        return {"_GUARD_COMPLETE": "complete_bash", "COMP_WORDS": line,
                "COMP_CWORD": str(len(words) - 1)}
    env = {"_GUARD_COMPLETE": f"complete_{shell}", "_TYPER_COMPLETE_ARGS": line}
    if shell == "fish":
        env["_TYPER_COMPLETE_FISH_ACTION"] = "get-args"
    return env


def _values(shell: str, out: str) -> list[str]:
    if shell == "bash":
        return [v for v in out.split("\n") if v]
    if shell == "fish":  # typer's help may run over lines: an item is a line with a TAB
        lines = [v for v in out.split("\n") if v]
        helped = any("\t" in v for v in lines)
        return [v.split("\t")[0] for v in lines if "\t" in v or not helped]
    if out.strip() == "_files":
        return []
    inner = out.strip()[len("_arguments '*: :(("):-len("))'")]
    # an item: "VALUE" or "VALUE":"HELP" (typer's help may run over lines)
    found = (re.match(r'"((?:[^"]|"")+)"(?::"|$)', e) for e in inner.split("\n"))
    return [m.group(1) for m in found if m]


def test_tab_offers_what_typer_offers(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same values as typer's own completion of the whole application, for bash, zsh
    and fish, after every command, option and value (their help is plain text here;
    typer's is wrapped by rich). The order may differ: the shells sort what they show."""
    from typer.main import get_command

    assert len(PROBES) > 300
    command = get_command(_app())  # typer's click command, as `guard` runs it
    wrong = []
    for line in PROBES:
        for shell in ("bash", "zsh", "fish"):
            env = _env(shell, line)
            said = completion.answer(env)
            assert said is not None
            typer_out, typer_code = _typer_says(capsys, env, command)
            ours, theirs = sorted(_values(shell, said[0])), sorted(_values(shell, typer_out))
            if said[1] != typer_code or ours != theirs:
                wrong.append(f"{shell} {line!r}: {ours} != typer's {theirs}")
    assert not wrong, "\n".join(wrong)


def test_zsh_and_fish_answers_carry_help(repo: Path) -> None:
    zsh = completion.answer(_env("zsh", "guard che"))
    assert zsh == ("_arguments '*: :((\"check\":\"Decide whether AGENT may do KIND to"
                   " PATH...\"))'\n", 0)
    assert completion.answer(_env("zsh", "guard check --cwd ")) == ("_files\n", 0)
    fish = completion.answer(_env("fish", "guard check --js"))
    assert fish == ("--json\tPrint JSON instead of text.\n", 0)
    is_args = {**_env("fish", "guard check --cwd "), "_TYPER_COMPLETE_FISH_ACTION": "is-args"}
    assert completion.answer(is_args) == ("", 1)  # no values: fish completes files


def test_other_requests_are_left_to_typer() -> None:
    assert completion.answer({"_GUARD_COMPLETE": "source_bash"}) is None
    assert completion.answer({"_GUARD_COMPLETE": "complete_tcsh"}) is None


# -- the installed scripts, driven as the shells do -----------------------------------------


def _script(shell: str) -> str:
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name="guard", complete_var="_GUARD_COMPLETE",
                                 shell=shell)


def _path_env(repo: Path) -> dict[str, str]:
    bindir = Path(sys.executable).parent
    if not (bindir / "guard").is_file():
        pytest.skip("no installed guard script next to this Python")
    env = {k: v for k, v in os.environ.items() if not k.startswith("_GUARD")}
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.mark.parametrize(
    ("words", "offered"),
    [
        (["guard", "install", "c"], ["claude-code", "codex", "cursor"]),
        (["guard", "check", "--agent", ""], ["plan", "build"]),
        (["guard", "lint", "--explain", "gl10"], [f"GL10{i}" for i in range(1, 8)]),
        (["guard", "pl"], ["plan-dir", "plan"]),
        (["guard", "plan", "st"], ["start", "status"]),
    ],
)
def test_bash_script_completes(repo: Path, words: list[str], offered: list[str]) -> None:
    """The script `guard --install-completion` installs for bash, run by a real bash."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash here")
    quoted = " ".join("'" + w + "'" for w in words)
    program = (f"{_script('bash')}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
               "_guard_completion guard\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    r = subprocess.run([bash, "--norc", "--noprofile", "-c", program], capture_output=True,
                       text=True, cwd=repo, env=_path_env(repo), timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == offered, r.stdout + r.stderr


def test_zsh_and_fish_scripts_read_the_answer(repo: Path) -> None:
    """zsh evaluates the answer (`_arguments ...`) and fish splits it into lines: run the
    commands their scripts run, as they run them, and check what the shells get."""
    env = {**_path_env(repo), "_GUARD_COMPLETE": "complete_zsh",
           "_TYPER_COMPLETE_ARGS": "guard mode "}
    r = subprocess.run(["guard"], capture_output=True, text=True, cwd=repo, env=env,
                       timeout=120, check=False)
    assert (r.returncode, r.stdout) == (0, "_arguments '*: :((\"build\"\n\"plan\"))'\n")
    assert "_GUARD_COMPLETE=complete_zsh" in _script("zsh")
    env.update(_GUARD_COMPLETE="complete_fish", _TYPER_COMPLETE_FISH_ACTION="get-args")
    r = subprocess.run(["guard"], capture_output=True, text=True, cwd=repo, env=env,
                       timeout=120, check=False)
    assert (r.returncode, r.stdout) == (0, "build\nplan\n")
    assert "_GUARD_COMPLETE=complete_fish" in _script("fish")
