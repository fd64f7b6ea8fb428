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
from guard.hooks.arguments import hook_arguments

USAGE = "usage: python -m guard.hooks HOST [--agent NAME] [--policy PATH] < payload.json"


def parse_args(argv: list[str]) -> tuple[str, str | None, str | None]:
    return hook_arguments(argv, HOSTS)


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
