"""``guard --help`` without typer: the root's help text, options and command list, and
:func:`render`, which prints them as typer's rich help does.

``guard --help`` is the first thing a new user types; typer's help renderer alone costs
ten times a bare Python start. :func:`guard.cli._main.main` prints it here with rich
alone, laid out with the very panels and tables typer's help uses, and the root typer
application (:func:`guard.cli._families.root`) takes its texts from here, so the two
cannot drift (tests/test_cli_speed.py compares them at several widths, with and without
colour).
"""

# Lazy imports: rich only when the help is printed.

from __future__ import annotations

import inspect
import os
import sys

from guard.cli._base import ColorMode, color_enabled, color_mode
from guard.cli._helptext import first_paragraph, help_text, highlighter

ROOT_HELP = (
    "OpenOxide Guard: permission policies and a sandbox that make plan mode a runtime"
    " fact for coding agents.\n\n"
    "An agent in plan mode may explore and ask, but change nothing except its plan"
    " file. Start with:\n\n"
    "  guard demo                          # watch the default policy decide\n"
    "  guard check write src/x.py          # may the plan agent write? exit 1: no\n"
    "  guard explain --agent plan write .openoxide/plans/p.md\n"
    "  guard install claude-code           # wire guard into Claude Code's hooks\n"
    "  guard run --agent plan -- aider     # confine any agent with Landlock\n"
    "  guard watch --agent plan --restore  # report and undo violations\n"
    "  guard mcp -- SERVER_CMD...          # guard any MCP server's tool calls\n"
    "  guard lint && guard review          # check the policy itself\n"
    "  guard plan-dir                      # where plan files live here\n\n"
    "Exit codes: 0 success/allow, 1 deny/violation, 3 ask/findings, 2 bad input or"
    " usage. NO_COLOR or --color never turns colour off; --json output is described in"
    " docs/json.md.")

VERSION_HELP = "Print guard's version and exit."
COLOR_HELP = (
    "Colour and styles: auto (a terminal, unless NO_COLOR is set), always, never."
    " Accepted after any command too."
)
USAGE = "Usage: guard [OPTIONS] COMMAND [ARGS]..."
#: The root's options as its help lists them: long, short, value, help, default.
OPTIONS: tuple[tuple[str, str, str, str, str], ...] = (
    ("--version", "-V", "", VERSION_HELP, ""),
    ("--color", "", "<auto|always|never>", COLOR_HELP, "auto"),
    ("--install-completion", "", "", "Install completion for the current shell.", ""),
    ("--show-completion", "", "",
     "Show completion for the current shell, to copy it or customize the installation.", ""),
    ("--help", "-h", "", "Show this message and exit.", ""),
)  # fmt: skip


def render() -> bool:
    """Print ``guard --help`` as typer's rich help does; False (nothing printed) on a
    terminal too narrow for the usage line to stay one line (typer then says it)."""
    from rich.align import Align
    from rich.columns import Columns
    from rich.console import Console, Group
    from rich.highlighter import RegexHighlighter
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text
    from rich.theme import Theme

    class Negative(RegexHighlighter):  # typer's, for --no-X options
        highlights = [  # noqa: RUF012
            r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])",
            r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        ]

    class Types(RegexHighlighter):  # typer's, for an option's <value>
        highlights = [  # noqa: RUF012
            r"^(?P<types_sep>(\[|<))",
            r"(?P<types_sep>\|)",
            r"(?P<types_sep>(\]|>))(\.\.\.)?$",
        ]

    options, negative, types = highlighter(), Negative(), Types()
    on = color_enabled(sys.stdout)
    forced = bool(os.environ.get("GITHUB_ACTIONS") or os.environ.get("FORCE_COLOR")
                  or os.environ.get("PY_COLORS"))  # fmt: skip
    if not on or os.environ.get("_TYPER_FORCE_DISABLE_TERMINAL"):
        forced = False
    force: bool | None = True if forced or (on and color_mode() is ColorMode.always) else None
    if not on:
        force = False
    width = os.environ.get("TERMINAL_WIDTH")
    con = Console(
        theme=Theme({"option": "bold cyan", "switch": "bold green",
                     "negative_option": "bold magenta", "negative_switch": "bold red",
                     "types": "bold yellow", "types_sep": "dim", "usage": "yellow"}),
        highlighter=options, color_system="auto" if on else None, force_terminal=force,
        width=int(width) if width else None,
    )  # fmt: skip
    if con.width < len(USAGE) + 4:
        return False

    def markup(text: str, style: str = "") -> Text:
        return options(Text.from_markup(inspect.cleandoc(text), style=style))

    con.print(Padding(options(USAGE), 1), style="bold")
    con.print(Padding(Align(Group(*help_text(ROOT_HELP)), pad=False), (0, 1, 1, 1)))
    table = Table(highlight=True, show_header=False, expand=True, box=None, show_lines=False,
                  leading=0, border_style=None, row_styles=None, pad_edge=False,
                  padding=(0, 1))  # fmt: skip
    for long, short, value, text, default in OPTIONS:
        said: list[Text] = [markup(text)]
        if default:
            said.append(Text(f"[default: {default}]", style="dim"))
        table.add_row(options(long), options(short), negative(""), negative(""),
                      types(Text(value, style="bold yellow", overflow="fold")), Columns(said))
    con.print(Panel(table, border_style="dim", title="Options", title_align="left"))
    commands = Table(highlight=False, show_header=False, expand=True, box=None,
                     show_lines=False, leading=0, border_style=None, row_styles=None,
                     pad_edge=False, padding=(0, 1))  # fmt: skip
    commands.add_column(style="bold cyan", no_wrap=True, width=max(len(n) for n, _ in SUMMARIES))
    commands.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for name, summary in SUMMARIES:
        commands.add_row(Text(name), options(Text.from_markup(first_paragraph(summary))))
    con.print(Panel(commands, border_style="dim", title="Commands", title_align="left"))
    sys.stdout.write("\n")  # typer's help ends with an empty line (click echoes it)
    sys.stdout.flush()
    return True

#: ``guard --help``'s list, in its order: each command's first help line. Printed without
#: loading any family (:func:`render`); tests/test_cli_speed.py checks it against the whole
#: application.
SUMMARIES: tuple[tuple[str, str], ...] = (
    ("check", "Decide whether AGENT may do KIND to PATH (or make a whole tool call)."),
    ("explain", "Show every list consulted, every pattern that matched, and which one"
     " decided."),
    ("schema", "Print the JSON Schema of policy files (for editor completion)."),
    ("plan-dir", "Print where plan files live here, and which rule chose it."),
    ("demo", "Feed scripted tool calls to the built-in default policy and show each"
     " decision."),
    ("effects", "Print the effects guard finds in one tool call (reads, writes, deletes,"
     " exec, network)."),
    ("hook", "Answer one host hook call: read the pending tool call on stdin, print the"
     " host's answer."),
    ("install", "Wire guard's hook into a host agent's settings file."),
    ("uninstall", "Take out what guard install wrote, and say what was left and why."),
    ("doctor", "Show which host agents are wired to guard here, whether their hook commands"
     " still run, and which guard layers are active on this machine."),
    ("lint", "Check policy files for mistakes that weaken plan mode: the rule catalog GLxxx."),
    ("review", "Security review of plan-mode isolation here: active layers and a red-team"
     " matrix."),
    ("mcp", "Run an MCP server behind guard: every tools/call is checked against the"
     " policy."),
    ("watch", "Watch the worktree while an agent works: report (and with --restore undo)"
     " every change its policy does not allow."),
    ("mode", "Print or set a session's mode, and the agent guard's hooks use here, with the"
     " reason."),
    ("events", "Print a session's events; --follow tails them as other processes publish."),
    ("replay", "What would the policy have decided for the tool calls of past sessions?"),
    ("run", "Run COMMAND so that the kernel refuses every write the agent's mode forbids."),
    ("confine", "Run ARGV under the confinement of this worktree's plan-mode shell commands."),
    ("ui", "The plan-mode cockpit: checklist, plan, activity and pending answers in one"
     " screen."),
    ("audit", "The audit log's integrity: `verify` checks the HMAC chain of its records"
     " (SECURITY.md, \"Audit trail\")."),
    ("import", "Convert a host agent's permission settings into a guard policy (with notes"
     " on every construct that does not convert exactly)."),
    ("quarantine", "Inspect and restore what `guard watch --restore` moved aside."),
    ("session", "Agent sessions: their mode (build or plan), plan artifact and checklist."),
    ("plan", "Plan mode for the worktree: start it, follow it, approve the plan."),
    ("policy", "Built-in policies: print one with line numbers (the lines explain cites)."),
)


