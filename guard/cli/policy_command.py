"""``guard policy show NAME``: a built-in policy's text with line numbers, the lines
``guard explain`` cites (``builtin:default:117``)."""

from __future__ import annotations

import sys

import typer

from guard.cli import completion
from guard.policy.loader import BUILTIN_PREFIX, _read

commands = typer.Typer()  # added to guard's application by guard.cli._app

policy_app = typer.Typer(
    help="Built-in policies: print one with line numbers (the lines explain cites).",
    no_args_is_help=True,
)
commands.add_typer(policy_app, name="policy")


@policy_app.command("show")
def show(
    name: str = typer.Argument(
        ..., metavar="NAME", help="A built-in policy: default, readonly (or builtin:NAME).",
        autocompletion=completion.policies,
    ),
    plain: bool = typer.Option(False, "--plain", help="The text alone, without line numbers."),
) -> None:
    """Print a built-in policy with line numbers.

    `guard explain` names the rule that decided as builtin:NAME:LINE; this shows that
    line in its place. Copy it (--plain) as the start of a policy of your own.

    Examples:

      guard policy show default

      guard policy show readonly --plain > .openoxide/policy.toml
    """
    spec = name if name.startswith(BUILTIN_PREFIX) else BUILTIN_PREFIX + name
    _, text, _ = _read(spec, None, "guard policy show")
    if plain:
        sys.stdout.write(text)
        return
    lines = text.splitlines()
    width = len(str(len(lines)))
    sys.stdout.write("".join(f"{i:>{width}}  {line}\n" for i, line in enumerate(lines, 1)))
