"""Gemini CLI: the host record; its parts are the modules beside this one."""

from guard.hosts.interface import Checklist, Host, Planning

HOST = Host(
    name="gemini",
    title="Gemini CLI",
    version="0.61.0",
    packages=("@google/gemini-cli",),
    dialect="gemini",
    protected=(
        "/.gemini/settings.json",
        "{home}/.gemini/settings.json",
        "{home}/.gemini/trustedFolders.json",
    ),
    planning=Planning(
        context_events=("SessionStart", "BeforeAgent"),
        hook_events=(
            ("SessionStart", None),
            ("BeforeAgent", None),
            ("BeforeTool", "exit_plan_mode"),
        ),
    ),
    changing_tools=frozenset({"write_file", "replace", "run_shell_command"}),
    checklist=Checklist("write_todos", "todos", ("description",)),
    hook_files=(".gemini/settings.json",),
    parts=frozenset({"hook", "red_team", "gestures", "settings", "tool_table", "transcript"}),
    environment=("GEMINI_",),
)
