"""``guard hook``, ``guard install``, ``guard uninstall``, ``guard doctor``."""

from __future__ import annotations

# Lazy imports: the hook runner, installer and doctor load when their command runs (CLI start-up).
import os
import sys
from typing import Any

import typer

from guard.cli import completion
from guard.cli._base import enter, print_json, warn
from guard.cli.doctor_view import doctor_tables as doctor_tables
from guard.cli.doctor_view import run_doctor
from guard.cli.options import CwdOpt, JsonOpt
from guard.effects import GuardError, did_you_mean
from guard.hooks import HOSTS
from guard.paths import find_worktree, plan_dir
from guard.probe import installation

commands = typer.Typer()  # added to guard's application by guard.cli._app

HOST_LIST = ", ".join(HOSTS)


def _known_host(host: str) -> str:
    if host not in HOSTS:
        hint = did_you_mean(host, HOSTS)
        raise typer.BadParameter(
            f"{host!r} is not a host guard knows; {hint}use one of: {HOST_LIST}"
        )
    return host


@commands.command(
    "hook",
    help=(
        "Answer one host hook call: read the pending tool call on stdin, print the"
        " host's answer.\n\n"
        "Hosts run this for you once `guard install HOST` wired it in. The agent is"
        " chosen, first match wins: --agent, $GUARD_AGENT, the worktree's guard mode,"
        " then the host's own permission mode (plan -> the policy's plan agent, else"
        " build). Any internal failure exits 2, which hosts treat as a block.\n\n"
        "Example:\n\n"
        '  echo \'{"hook_event_name":"PreToolUse","tool_name":"Write","cwd":".",\'\\\n'
        '  \'"tool_input":{"file_path":"src/x.py","content":""}}\' \\\n'
        "  | guard hook claude-code --agent plan"
    ),
)
def hook_cmd(
    host: str = typer.Argument(
        ..., help=f"One of: {HOST_LIST}.", metavar="HOST", callback=_known_host,
        autocompletion=completion.hosts
    ),
    agent: str | None = typer.Option(None, "--agent", "-a",
                                     help="The policy agent to decide as (default: by mode)."),
    policy: str | None = typer.Option(None, "--policy", "-p",
                                      help="Policy file or builtin:NAME (default: discovered)."),
) -> None:
    from guard.hooks.front_door import decide

    answer = decide(host, sys.stdin.buffer.read(), agent=agent, policy=policy)
    sys.stdout.write(answer.stdout)
    sys.stderr.write(answer.stderr)
    raise typer.Exit(answer.exit_code)


def _scope(project: bool, user: bool, local: bool = False) -> Any:
    """The scope asked for on the command line; None: let install choose."""
    asked = [name for name, on in (("project", project), ("local", local), ("user", user)) if on]
    if len(asked) > 1:
        raise GuardError("choose one of --project, --local and --user")
    return asked[0] if asked else None


@commands.command(
    "install",
    help=(
        "Wire guard's hook into a host agent's settings file.\n\n"
        "Idempotent; keeps every other key and hook; writes atomically and keeps the"
        " previous file as <file>.guard-backup. --local writes a file only you have: Claude"
        " Code's .claude/settings.local.json, for the other hosts their project file kept out"
        " of git (a line in .git/info/exclude), or your user-wide file when your team tracks"
        " that one (Gemini: always the user-wide file). --project writes the worktree's shared"
        " file, which teams commit; --user the one in your home directory. Without any of"
        " them: --local where the shared file is tracked by git, else --project with a"
        " one-line warning (for gemini: --user). On a machine without guard the hook still"
        " blocks, with a message naming guard and how to install it or take the hook out."
        " For Codex it also records the hook (and a project's trust) in"
        " ~/.codex/config.toml, which Codex requires before it runs any hook; for OpenCode it"
        " writes a plugin. It ends by checking that the host will run the hook and exits 1,"
        " naming the reason, when it will not.\n\n"
        "Examples:\n\n"
        "  guard install claude-code --local   # .claude/settings.local.json: yours\n"
        "  guard install claude-code           # the same if .claude/settings.json is\n"
        "                                      # tracked by git\n"
        "  guard install codex --user          # ~/.codex/hooks.json, trusted\n"
        "  guard install gemini                # ~/.gemini/settings.json\n"
        "  guard install opencode              # .opencode/plugin/guard.js\n"
        "  guard install claude-code --agent plan   # always decide as the plan agent"
    ),
)
def install_cmd(
    host: str = typer.Argument(
        ..., help=f"The host agent to wire: {HOST_LIST}.", metavar="HOST", callback=_known_host,
        autocompletion=completion.hosts
    ),
    project: bool = typer.Option(False, "--project", help="This worktree's shared settings."),
    local: bool = typer.Option(False, "--local", help="A settings file only you have."),
    user: bool = typer.Option(False, "--user", help="Your user-wide settings."),
    agent: str | None = typer.Option(None, "--agent", "-a",
                                     help="Pin the policy agent in the hook."),
    policy: str | None = typer.Option(None, "--policy", "-p",
                                      help="Pin a policy file or builtin:NAME in the hook."),
    cwd: CwdOpt = None,
    as_json: JsonOpt = False,
) -> None:
    from guard.setup.install import install

    enter(cwd)
    change = install(host, _scope(project, user, local), agent=agent, policy=policy)
    # the file is written where the command runs when there is no worktree: say so
    here = change.path.is_relative_to(os.path.realpath(os.getcwd()))
    no_worktree = _no_worktree_note() if here else None
    _warn_if_editable()
    if as_json:
        print_json({**change.to_json(), "worktree": _worktree_or_none()})
        if change.problems:
            raise typer.Exit(1)
        return
    if change.warning:
        warn(change.warning.removeprefix("warning: "))
    _report_install(host, change, no_worktree)


def _warn_if_editable() -> None:
    """An editable install's hook runs the checkout's code: say so, and what lasts."""
    inst = installation()
    if inst.checkout is not None:
        warn(
            f"guard is an editable install: the hook runs the code in {inst.checkout}, so"
            " moving or deleting that checkout breaks the hook (the host then refuses every"
            " call); for hooks that outlive it, install guard without -e (`pip install .`"
            " or `pipx install .`) and run `guard install` again"
        )


def _report_install(host: str, change: Any, no_worktree: str | None = None) -> None:
    if not change.changed:
        print(f"guard is already wired into {host}: {change.path} (unchanged)")
    else:
        print(f"wired guard into {host}: {change.path}")
    if no_worktree:
        print(no_worktree)
    if change.removed:
        print(
            f"  replaced {change.removed} older guard entr{'y' if change.removed == 1 else 'ies'}"
        )
    if change.changed and change.backup:
        print(f"  previous file kept as {change.backup}")
    if change.changed:
        print(f"  hook command: {change.command}")
    for note in change.notes:
        print(f"  {note}")
    if change.problems:
        for problem in change.problems:
            print(f"error: {problem}", file=sys.stderr)
        print(f"error: {host} will NOT run guard's hook; fix the above, then check with"
              " guard doctor", file=sys.stderr)
        raise typer.Exit(1)
    print(f"  checked: {host} will run the hook")


def _worktree_or_none() -> str | None:
    wt = find_worktree(os.getcwd())
    return str(wt) if wt is not None else None


def _no_worktree_note() -> str | None:
    """Said when --project is used outside any repository."""
    if _worktree_or_none() is not None:
        return None

    return (
        f"  note: {os.getcwd()} is not inside a worktree (no .git, .hg, .jj or .svn found);"
        f" the settings file is written here and plans will go to the data directory:"
        f" {plan_dir(os.getcwd()).path}"
    )


@commands.command(
    "uninstall",
    help=(
        "Take out what guard install wrote, and say what was left and why.\n\n"
        "That is guard's hook entries (and only them; a settings"
        " file guard created goes, a file it found gets its bytes back when nothing else"
        " changed), the Codex trust it recorded (the hook's and the project's), the line that"
        " kept a local file out of git, and the folders it created when they are empty."
        " Without --project, --local or --user: where guard installed for this worktree.\n\n"
        "Example:\n\n  guard uninstall claude-code"
    ),
)
def uninstall_cmd(
    host: str = typer.Argument(
        ..., help=f"The host agent to unwire: {HOST_LIST}.", metavar="HOST", callback=_known_host,
        autocompletion=completion.hosts
    ),
    project: bool = typer.Option(False, "--project", help="This worktree's shared settings."),
    local: bool = typer.Option(False, "--local", help="The settings file only you have."),
    user: bool = typer.Option(False, "--user", help="Your user-wide settings."),
    cwd: CwdOpt = None,
    as_json: JsonOpt = False,
) -> None:
    from guard.setup.install import uninstall

    enter(cwd)
    change = uninstall(host, _scope(project, user, local))
    if as_json:
        print_json(change.to_json())
        return
    if not change.changed:
        print(f"guard was not wired into {host}: {change.path} (unchanged)")
        return
    print(
        f"removed {change.removed} guard entr{'y' if change.removed == 1 else 'ies'}"
        f" from {change.path}"
    )
    if change.backup:
        print(f"  previous file kept as {change.backup}")
    for note in change.notes:
        print(f"  {note}")


@commands.command(
    "doctor",
    help=(
        "Show which host agents are wired to guard here, whether their hook commands"
        " still run, and which guard layers are active on this machine.\n\n"
        "Exits 1 when anything will block or skip: a wired hook that is broken (it would"
        " block every call) or skipped (the host will not run it: Codex hook or project trust"
        " missing or stale, Gemini workspace not trusted, a settings file another tool"
        " rewrote), a policy that does not load (every hook call is blocked), missing tool"
        " analysis, a host session held after it ran a tool without guard (hook_missed:"
        " `guard session resume`). The last line names the audit log.\n\n"
        "Example:\n\n  guard doctor\n\n"
        "  guard doctor --json | jq '.hosts[] | select(.status==\"ok\")'"
    ),
)
def doctor_cmd(
    cwd: CwdOpt = None,
    as_json: JsonOpt = False,
) -> None:
    enter(cwd)
    code = run_doctor(as_json)
    if code:
        raise typer.Exit(code)
