"""The hosts' environment variables reach the hook client through a generated table.

Each host record names the variables its parts read while deciding (``environment``);
the hook client, which imports nothing of guard, reads them from
guard/hosts/hook_env.py, a module of two tuples. That table must say what the records
say: ``python tests/test_host_env.py`` writes it again from the registry.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

from guard import hosts
from guard.hooks import hookclient

TABLE = Path(__file__).resolve().parents[1] / "guard" / "hosts" / "hook_env.py"
HEADER_END = "\n\n#: whole names\n"


def from_registry() -> tuple[tuple[str, ...], tuple[str, ...]]:
    names: list[str] = []
    prefixes: list[str] = []
    for host in hosts.HOSTS:
        for var in host.environment:
            (prefixes if var.endswith("_") else names).append(var)
    return tuple(names), tuple(prefixes)


def _tuple(values: tuple[str, ...]) -> str:
    """A tuple of strings as ruff writes it (double quotes)."""
    items = ", ".join(f'"{v}"' for v in values)
    return f"({items},)" if len(values) == 1 else f"({items})"


def render(names: tuple[str, ...], prefixes: tuple[str, ...]) -> str:
    header = TABLE.read_text(encoding="utf-8").split(HEADER_END)[0]
    return (f"{header}{HEADER_END}NAMES = {_tuple(names)}\n"
            f"#: prefixes\nPREFIXES = {_tuple(prefixes)}\n")


def test_the_table_says_what_the_host_records_say() -> None:
    spec = importlib.util.spec_from_file_location("hook_env_under_test", TABLE)
    assert spec is not None and spec.loader is not None
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    assert from_registry() == (table.NAMES, table.PREFIXES), (
        "guard/hosts/hook_env.py is stale: run `python tests/test_host_env.py`")
    assert TABLE.read_text(encoding="utf-8") == render(*from_registry())


def test_the_hook_client_keys_its_daemon_by_each_host_s_variables() -> None:
    names, prefixes = from_registry()
    assert names and prefixes  # the registry names some: the check below means something
    assert set(names) <= set(hookclient.SAME_ENV)
    assert set(prefixes) <= set(hookclient.SAME_PREFIXES)
    env = {"HOME": "/h", "UNRELATED": "x"}
    env.update({n: "v" for n in names})
    env.update({p + "SOMETHING": "v" for p in prefixes})
    kept = hookclient.decision_env(env)
    assert "UNRELATED" not in kept
    assert set(env) - {"UNRELATED"} == set(kept)


def test_the_table_imports_nothing() -> None:
    tree = ast.parse(TABLE.read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


if __name__ == "__main__":
    TABLE.write_text(render(*from_registry()), encoding="utf-8")
    sys.stdout.write(f"wrote {TABLE}\n")
