"""`guard demo`: scripted tool calls decided by the built-in default policy."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from guard.decide import Guard
from guard.effects import Action, Effect
from guard.hosts import HOSTS

commands = typer.Typer()  # added to guard's application by guard.cli._app

STYLE = {Action.ALLOW: "green", Action.ASK: "yellow", Action.DENY: "red"}
#: the hook settings file of the first host that has one (the registry's order)
HOOK_SETTINGS = next(h.hook_files[0] for h in HOSTS if h.hook_files)


def make_scratch_repo(base: Path) -> Path:
    """A small git repository with a planted symlink in the plan directory."""
    repo = base / "scratch-repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('hello')\n")
    (repo / ".env").write_text("TOKEN=not-a-real-secret\n")
    plans = repo / ".openoxide" / "plans"
    plans.mkdir(parents=True)
    # an attacker's trick: a plan-looking name that points at source code
    os.symlink("../../src/app.py", plans / "innocent.md")
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    else:
        (repo / ".git").mkdir()
    return repo


SCRIPT: list[tuple[str, Effect]] = [
    ("read a source file", Effect.read("src/app.py")),
    ("read a secret", Effect.read(".env")),
    ("write the plan file", Effect.write(".openoxide/plans/20261202T120000Z-s1-add-login.md")),
    ("write into src/", Effect.write("src/app.py")),
    ("create a new source file", Effect.write("src/new_module.py")),
    (
        "write through a symlink planted in the plan dir",
        Effect.write(".openoxide/plans/innocent.md"),
    ),
    ("escape with ..", Effect.write(".openoxide/plans/../../../outside.txt")),
    ("climb out of the plan dir", Effect.write(".openoxide/plans/../policy.toml")),
    ("plant a git hook", Effect.write(".git/hooks/pre-commit")),
    ("edit the agent's hook settings", Effect.write(HOOK_SETTINGS)),
    ("delete the plan file", Effect.delete(".openoxide/plans/20261202T120000Z-s1-add-login.md")),
    ("update the execution checklist", Effect.tool("update_plan")),
    ("ask the user a question", Effect.tool("request_user_input")),
    ("an unknown tool", Effect.tool("frobnicate")),
]


def run_demo(con: Console, keep: bool = False) -> None:
    base = Path(tempfile.mkdtemp(prefix="guard-demo-"))
    try:
        repo = make_scratch_repo(base)
        g = Guard.load("builtin:default", worktree=repo)
        con.print(f"[bold]OpenOxide Guard demo[/] - policy {g.loaded.name}, scratch repo {repo}")
        con.print(f"plan directory: {g.roots.plans}\n")
        for agent in ("plan", "build"):
            con.print(f"[bold underline]agent {agent}[/] (mode {g.agent(agent).mode})")
            for label, effect in SCRIPT:
                d = g.decide(agent, [effect], repo)
                color = STYLE[d.action]
                con.print(f"  [bold {color}]{d.action.value.upper():5}[/] {label}: {effect}")
                con.print(f"        [dim]{d.reason}[/]")
            con.print()
        con.print(
            "Try it yourself (in a git repository, with guard on PATH):"
            " [bold]guard check --agent plan write src/app.py[/],"
            " [bold]guard explain --agent plan write .openoxide/plans/p.md[/]"
        )
        if keep:
            con.print(f"scratch repository kept at {repo}")
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


@commands.command()
def demo(
    keep: Annotated[
        bool, typer.Option(help="Keep the scratch repository and print its path.")
    ] = False,
) -> None:
    """Feed scripted tool calls to the built-in default policy and show each decision.

    A scratch git repository is made in a temporary directory; nothing else is touched.
    """
    run_demo(Console(highlight=False, soft_wrap=True), keep=keep)
