"""No module under guard/ is over MAX_LINES lines: one module reads in a few screens.

OVER_LIMIT names the modules that were over the limit when this test was written,
each with its size then as a ceiling, so that none of them can grow. The list must
only shrink: a module is taken off it once it is split (the test fails until it is),
and nothing is ever added to it. A new module over the limit, or a listed one over
its ceiling, fails the test: split it by what it holds (as guard/match/ and
guard/decide.py, guard/agent_rules.py, guard/decisions.py were).
"""

from __future__ import annotations

from pathlib import Path

GUARD = Path(__file__).resolve().parents[1] / "guard"
MAX_LINES = 600

#: module (relative to the repository) -> its line count when listed: a ceiling.
#: ONLY SHRINKS: remove an entry when its module is split; never add one.
OVER_LIMIT: dict[str, int] = {}


def _sizes() -> dict[str, int]:
    root = GUARD.parent
    return {
        p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted(GUARD.rglob("*.py"))
    }


def test_no_module_is_over_the_limit_and_the_listed_ones_do_not_grow() -> None:
    sizes = _sizes()
    assert "guard/decide.py" in sizes, "the walk over guard/ found no modules"
    problems = []
    for module, lines in sizes.items():
        ceiling = OVER_LIMIT.get(module)
        if ceiling is None and lines > MAX_LINES:
            problems.append(
                f"{module}: {lines} lines, over {MAX_LINES}; split it by what it holds"
                " (do not add it to OVER_LIMIT: that list only shrinks)"
            )
        elif ceiling is not None and lines > ceiling:
            problems.append(
                f"{module}: {lines} lines, over its ceiling of {ceiling} in OVER_LIMIT;"
                " a module over the limit may not grow: split it, or move code out"
            )
    assert not problems, "\n".join(problems)


def test_the_list_of_modules_over_the_limit_only_shrinks() -> None:
    """An entry whose module is gone, or now within the limit, must be removed: the
    list says which modules are still to split, and nothing else."""
    sizes = _sizes()
    stale = [
        f"{module}: {'no such module' if module not in sizes else f'{sizes[module]} lines'};"
        " remove it from OVER_LIMIT"
        for module in OVER_LIMIT
        if sizes.get(module, 0) <= MAX_LINES
    ]
    assert not stale, "\n".join(stale)
    assert all(ceiling > MAX_LINES for ceiling in OVER_LIMIT.values())
