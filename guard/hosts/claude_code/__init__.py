"""Claude Code: the host record; its parts are the modules beside this one."""

from guard.hosts.interface import Checklist, Host, Planning

HOST = Host(
    name="claude-code",
    title="Claude Code",
    version="2.1.332",
    packages=("@anthropic-ai/claude-code",),
    dialect="claude-code",
    protected=("/.claude/settings*.json", "{home}/.claude/settings*.json"),
    planning=Planning(
        context_events=("SessionStart", "UserPromptSubmit"),
        hook_events=(
            ("SessionStart", None),
            ("UserPromptSubmit", None),
            ("PreToolUse", "ExitPlanMode"),
            ("PostToolUse", "ExitPlanMode"),
        ),
    ),
    changing_tools=frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"}),
    checklist=Checklist("TodoWrite", "todos", ("content",)),
    hook_files=(".claude/settings.json", ".claude/settings.local.json"),
    parts=frozenset({"hook", "red_team", "gestures", "tool_table", "importer", "transcript"}),
    reads_transcript=True,
    native_version=r"/claude/versions/([0-9][0-9A-Za-z.+-]*)$",
    environment=("CLAUDE_CODE_ENTRYPOINT",),
)
