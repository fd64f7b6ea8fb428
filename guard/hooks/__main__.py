"""The hook's entry point: ``python -I -m guard.hooks HOST [--agent A] [--policy P]``.

Kept apart from the typer CLI so that a hook call pays for Python's start and
the policy core only. Whatever happens, it exits 0 with the host's answer or
2 (block) with the reason on stderr.
"""

from __future__ import annotations

# Lazy imports: inside main's try, so a broken install still answers with a block.
import contextlib
import sys

from guard.hooks import HOSTS

USAGE = "usage: python -m guard.hooks HOST [--agent NAME] [--policy PATH] < payload.json"


def parse_args(argv: list[str]) -> tuple[str, str | None, str | None]:
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
        elif arg.startswith("-") or host is not None:
            raise ValueError(f"unexpected argument {arg!r}")
        else:
            host = arg
    if host is None:
        raise ValueError(f"which host? ({', '.join(HOSTS)})")
    return host, agent, policy


def main(argv: list[str] | None = None) -> int:
    try:
        host, agent, policy = parse_args(sys.argv[1:] if argv is None else argv)
        from guard.hooks.front_door import decide

        answer = decide(host, sys.stdin.buffer.read(), agent=agent, policy=policy)
        if answer.stdout:
            sys.stdout.write(answer.stdout)
            sys.stdout.flush()
        if answer.stderr:
            sys.stderr.write(answer.stderr)
        return answer.exit_code
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            sys.stderr.write(f"guard (fail-closed): {type(exc).__name__}: {exc}\n{USAGE}\n")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
