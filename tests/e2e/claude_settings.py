"""Rewriting the hook entries ``guard install claude-code`` wrote, for the e2e tests that
need another hook command (the test-only entry point with the walls' test switches on)
or an entry as an older guard installed it (without ``"onFailure": "block"``)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

SWITCHED = Path(__file__).resolve().parent.parent / "switched.py"


def switched_hook(*switches: str) -> str:
    """The Claude Code hook deciding in-process with ``switches`` on (``no-namespaces``,
    ``no-walls``), through the test-only entry point; a failure blocks (exit 2)."""
    words = [sys.executable, str(SWITCHED), *(f"--{s}" for s in switches), "guard.hooks",
             "claude-code"]
    return " ".join(shlex.quote(w) for w in words) + " || exit 2"


def rewrite_hooks(repo: Path, *, command: str | None = None, on_failure: bool = True,
                  timeout: int | None = None) -> None:
    """Give guard's PreToolUse and PostToolUse handlers ``command`` (else keep theirs),
    drop their ``onFailure`` when ``on_failure`` is False, set their ``timeout``."""
    path = repo / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    for event in ("PreToolUse", "PostToolUse"):
        for group in settings["hooks"][event]:
            for handler in group["hooks"]:
                if command is not None:
                    handler["command"] = command
                if not on_failure:
                    handler.pop("onFailure", None)
                if timeout is not None:
                    handler["timeout"] = timeout
    path.write_text(json.dumps(settings, indent=2))
