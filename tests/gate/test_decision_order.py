"""One decision order: only :func:`guard.gate.resolve` reads what chooses the policy and agent.

Which policy and which agent decide a call is chosen from ``$GUARD_POLICY``,
``$GUARD_AGENT`` and the planning sessions. When a second module reads those
variables it grows its own copy of the order (the planning runtime once did, and
``guard mode`` could then name another agent than the hook used). This test walks
every module's syntax tree and fails on any read of those names outside the gate.
Writing or forwarding them (a sandbox setting ``GUARD_AGENT`` for the command it
runs, the hook client passing them to hookd) is not a read and stays allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import guard

NAMES = {"GUARD_POLICY", "GUARD_AGENT"}
PACKAGE = Path(guard.__file__).parent
#: module -> why it may read them
ALLOWED = {
    "gate.py": "resolve and its helpers: the one decision order",
    # Guard.load() is the library's documented entry (README: `--policy` > `$GUARD_POLICY`
    # > the worktree's > builtin); guard's own front doors name the policy through
    # guard.gate.policy_named before they load it.
    "decide.py": "the policy discovery of the public Guard.load()",
    # TAB completion answers before anything of guard loads (50 ms a TAB): it offers the
    # agent names of the policy guard would use here and decides nothing.
    "cli/completion.py": "the agent names TAB offers",
}


def _named(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in NAMES


def _is_read(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and node.args and _named(node.args[0]):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in ("get", "getenv", "pop", "setdefault")
    if isinstance(node, ast.Subscript):
        return isinstance(node.ctx, ast.Load) and _named(node.slice)
    if isinstance(node, ast.Compare):
        return _named(node.left) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
    return False


def reads(tree: ast.AST) -> list[int]:
    """Lines reading one of NAMES: ``x.get(N)``, ``getenv(N)``, ``x.pop(N)``, ``x[N]``
    (loaded), ``N in x``."""
    return sorted(getattr(node, "lineno", 0) for node in ast.walk(tree) if _is_read(node))


def test_only_the_gate_reads_the_policy_and_agent_variables() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ALLOWED:
            continue
        for line in reads(ast.parse(path.read_text(encoding="utf-8"))):
            found.append(f"guard/{rel}:{line}")
    assert not found, (
        "these read $GUARD_POLICY/$GUARD_AGENT; ask guard.gate.resolve (or"
        f" guard.gate.policy_named) instead: {found}"
    )


def test_the_check_sees_each_kind_of_read() -> None:
    """The walk is not vacuous: each way of reading is caught, a write is not."""
    code = (
        "a = env.get('GUARD_AGENT')\n"
        "b = os.getenv('GUARD_POLICY')\n"
        "c = os.environ['GUARD_POLICY']\n"
        "d = 'GUARD_AGENT' in env\n"
        "env['GUARD_AGENT'] = 'plan'\n"
        "e = {'GUARD_AGENT': 'plan'}\n"
        "KEYS = ('GUARD_AGENT', 'GUARD_POLICY')\n"
    )
    assert reads(ast.parse(code)) == [1, 2, 3, 4]
    gate = (PACKAGE / "gate.py").read_text(encoding="utf-8")
    assert reads(ast.parse(gate)), "the gate is where they are read"
