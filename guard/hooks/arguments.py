"""The arguments of guard's hook commands: ``HOST [--agent NAME] [--policy PATH]``.

Both hook entry points read them here (the policy hook, :mod:`guard.hooks.__main__`, and
the planning hook, :mod:`guard.planning.host`), so the two accept the same command line.
"""

from __future__ import annotations


def hook_arguments(
    argv: list[str], known: tuple[str, ...], *, only_known: bool = False
) -> tuple[str, str | None, str | None]:
    """(host, agent, policy); ValueError naming what is wrong. ``known``: the hosts this
    entry point serves, named when the host is missing; ``only_known``: another host is
    refused here (else later, by the caller, with its own answer)."""
    host: str | None = None
    agent: str | None = None
    policy: str | None = None
    it = iter(argv)
    for arg in it:
        if arg in ("--agent", "--policy"):
            value = next(it, None)
            if not value:
                raise ValueError(f"{arg} needs a value")
            if arg == "--agent":
                agent = value
            else:
                policy = value
        elif arg.startswith("--agent="):
            agent = arg.split("=", 1)[1]
        elif arg.startswith("--policy="):
            policy = arg.split("=", 1)[1]
        elif arg.startswith("-") or host is not None or (only_known and arg not in known):
            listed = f" (hosts: {', '.join(known)})" if only_known else ""
            raise ValueError(f"unexpected argument {arg!r}{listed}")
        else:
            host = arg
    if host is None:
        raise ValueError(f"which host? ({', '.join(known)})")
    return host, agent, policy
