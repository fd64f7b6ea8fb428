"""OpenCode: a plugin's ``tool.execute.before`` (format followed: OpenCode 1.18.33).

OpenCode has no command hooks, only JavaScript plugins. ``guard install
opencode`` writes ``.opencode/plugin/guard.js`` (``--user``:
``~/.config/opencode/plugin/guard.js``), which sends each pending tool call to
guard's hook command on stdin as::

    {"hook_event_name": "tool.execute.before", "tool_name": "write",
     "tool_input": {"filePath": "...", "content": "..."}, "cwd": "...",
     "session_id": "ses_...", "tool_use_id": "call_..."}

and reads back ``{"decision": "allow"|"deny", "reason": "...", "args"?: {...}}``.
The plugin throws on a deny (OpenCode refuses the call and shows the model the
message), on exit 2, and on anything it cannot read; ``args`` replaces fields
of the tool's arguments: an allow_confined verdict comes back as an allow with
``args`` holding the whole input, ``command`` rewritten to run confined
(OpenCode runs ``output.args`` as changed). A plugin cannot ask, so guard
answers ask as deny.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard.hooks.adapter import (
    HookAnswer,
    HookCall,
    HostAdapter,
    Scope,
    rewritten_input,
)
from guard.hooks.settings_file import Change, SettingsError
from guard.hosts.opencode import HOST

if TYPE_CHECKING:
    from guard.gate import Verdict

EVENT = "tool.execute.before"
PLUGIN_NAME = "guard.js"
MARKER = "// openoxide-guard:"
_PLACEHOLDER = '"__GUARD_HOOK_COMMAND__"'
_COMMAND_LINE = re.compile(r"^const GUARD_HOOK = (.*);$", re.M)


def config_home() -> Path:
    """OpenCode's user config folder: ``$XDG_CONFIG_HOME/opencode``, else ``~/.config/opencode``."""
    base = os.environ.get("XDG_CONFIG_HOME", "").strip() or os.path.expanduser("~/.config")
    return Path(base) / "opencode"


def plugin_text(command: str) -> str:
    template = (Path(__file__).with_name("plugin.js")).read_text(encoding="utf-8")
    if _PLACEHOLDER not in template:
        raise RuntimeError("plugin.js has no command placeholder")
    return template.replace(_PLACEHOLDER, json.dumps(command))


def plugin_command(text: str) -> str | None:
    """The hook command in a plugin file guard wrote, or None when it is not ours."""
    if not text.startswith(MARKER):
        return None
    found = _COMMAND_LINE.search(text)
    if found is None:
        return None
    try:
        value = json.loads(found.group(1))
    except ValueError:
        return None
    return value if isinstance(value, str) else None


class OpenCode(HostAdapter, host=HOST, follows="plugins"):
    honours_ask = False
    can_rewrite = True
    post_event = "tool.execute.after"

    def parse(self, payload: Mapping[str, Any]) -> HookCall:
        return self.tool_event(payload, EVENT)

    def answer(self, verdict: Verdict, hook: HookCall) -> HookAnswer:
        told = self.answered(verdict, hook)
        if told == "allow":
            return HookAnswer.json({"decision": "allow"})
        if told == "allow_confined":
            return HookAnswer.json({"decision": "allow", "reason": self.reason(verdict, hook),
                                    "args": rewritten_input(hook, verdict)})
        return HookAnswer.json({"decision": "deny", "reason": self.reason(verdict, hook)})

    def post_answer(self, message: str | None) -> HookAnswer:
        return HookAnswer.json({} if message is None else {"message": message})

    def settings_path(self, scope: Scope, project: Path, home: Path) -> Path:
        if scope != "user":
            return project / ".opencode" / "plugin" / PLUGIN_NAME
        return config_home() / "plugin" / PLUGIN_NAME

    # The "settings" of OpenCode are a plugin file, not JSON: install.py writes it with
    # install_plugin; these keep the interface for callers that pass parsed JSON.
    def add_entry(self, settings: dict[str, Any], command: str) -> None:
        raise ValueError("OpenCode is wired with a plugin file, not a settings entry")

    def find_entries(self, settings: Mapping[str, Any]) -> list[str]:
        return []

    def remove_entries(self, settings: dict[str, Any]) -> int:
        return 0


ADAPTER = OpenCode()


def _path(scope: Scope, project: Path) -> Path:
    return ADAPTER.settings_path(scope, project, Path(os.path.expanduser("~")))


def installed_command(path: Path) -> tuple[str | None, str | None]:
    """(our hook command, problem): the command of guard's plugin at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path}: cannot read: {exc}"
    command = plugin_command(text)
    if command is None:
        return None, f"{path} is not guard's plugin (someone else's file has this name)"
    if text != plugin_text(command):
        return command, (f"another tool rewrote {path}: it is not the plugin guard wrote;"
                         " run guard install opencode again")
    return command, None


def install_plugin(scope: Scope, project: Path, command: str) -> Change:
    path = _path(scope, project)
    text = plugin_text(command)
    old: str | None = None
    if path.exists():
        old = path.read_text(encoding="utf-8", errors="replace")
        if plugin_command(old) is None:
            raise SettingsError(f"{path} exists and is not guard's plugin; move it away and"
                                " run the command again; guard left it untouched")
        if old == text:
            return Change(path, False, False, 0, None, command)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{PLUGIN_NAME}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return Change(path, True, True, 1 if old is not None else 0, None, command)


def uninstall_plugin(scope: Scope, project: Path) -> Change:
    path = _path(scope, project)
    if not path.exists():
        return Change(path, False, False, 0, None, None)
    if plugin_command(path.read_text(encoding="utf-8", errors="replace")) is None:
        raise SettingsError(f"{path} is not guard's plugin; guard left it untouched")
    path.unlink()
    return Change(path, True, False, 1, None, None)
