"""OpenCode: the host record; its parts are the modules beside this one."""

from guard.hosts.interface import Checklist, Host

HOST = Host(
    name="opencode",
    title="OpenCode",
    version="1.18.33",
    packages=("opencode-ai", "opencode"),
    dialect="opencode",
    protected=("/.opencode/plugin/", "{home}/.config/opencode/plugin/"),
    changing_tools=frozenset({"write", "edit", "multiedit", "patch", "bash"}),
    checklist=Checklist("todowrite", "todos", ("content",)),
    parts=frozenset({"hook", "red_team", "settings", "tool_table", "importer", "transcript"}),
)
