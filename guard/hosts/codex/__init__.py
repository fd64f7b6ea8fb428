"""Codex CLI: the host record; its parts are the modules beside this one."""

from guard.hosts.interface import Checklist, Host, Planning

HOST = Host(
    name="codex",
    title="Codex CLI",
    version="0.171.0",
    packages=("@openai/codex",),
    dialect="codex",
    protected=("/.codex/", "{home}/.codex/"),
    planning=Planning(
        context_events=("SessionStart", "UserPromptSubmit"),
        hook_events=(("SessionStart", None), ("UserPromptSubmit", None), ("Stop", None)),
    ),
    changing_tools=frozenset({"Bash", "apply_patch"}),
    checklist=Checklist("update_plan", "plan", ("step",)),
    hook_files=(".codex/hooks.json", ".codex/config.toml"),
    parts=frozenset({"hook", "red_team", "gestures", "settings", "tool_table", "transcript"}),
    environment=("CODEX_",),
)
