"""Values offered on TAB: hosts, the policy's agents, this worktree's sessions, lint rule
codes. Each reads as little as it can (a directory listing, a list of names); a failure
offers nothing rather than print an error into the shell.
"""

# Lazy imports: each source of values only when its option is completed (TAB speed).

from __future__ import annotations

import os


def _starting(values: list[str], incomplete: str) -> list[str]:
    return [v for v in values if v.startswith(incomplete)]


def hosts(incomplete: str) -> list[str]:
    from guard.hooks import HOSTS

    return _starting(list(HOSTS), incomplete)


def agents(incomplete: str) -> list[str]:
    try:
        from guard.decide import Guard

        return _starting(list(Guard.load(cwd=os.getcwd()).agent_names), incomplete)
    except Exception:  # a broken policy: nothing to offer (the command itself will say)
        return []


def sessions(incomplete: str) -> list[str]:
    from guard.planning._vocabulary import sessions_dir

    try:
        names = os.listdir(sessions_dir(os.getcwd()))
    except OSError:
        return []
    ids = sorted(n[: -len(".json")] for n in names
                 if n.endswith(".json") and not n.startswith("."))
    return _starting(ids, incomplete)


def rule_codes(incomplete: str) -> list[str]:
    from guard.lint import RULES

    return _starting(sorted(RULES), incomplete.upper())
