"""Literal brackets survive rich markup: every help string and every doctor line, rendered
through the renderer the user sees, keeps its ``[re2]`` or ``[tool.guard.lint]``."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text
from typer.main import get_command

from guard.cli import app
from guard.cli.hooks import doctor_tables
from guard.setup.doctor import Check


def _strings(cmd: Any, path: str) -> Iterator[tuple[str, str]]:
    for what in ("help", "epilog", "short_help"):
        text = getattr(cmd, what, None)
        if text:
            yield f"{path} {what}", text
    for p in getattr(cmd, "params", []):
        if getattr(p, "help", None):
            yield f"{path} --{p.name}", p.help
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        yield from _strings(sub, f"{path} {name}")


HELP = list(_strings(get_command(app), "guard"))


def test_every_command_has_help_strings_to_check() -> None:
    assert len(HELP) > 100


@pytest.mark.parametrize(("where", "text"), HELP, ids=[w for w, _ in HELP])
def test_help_text_renders_as_written(where: str, text: str) -> None:
    """typer renders help as rich markup: a bracket meant literally is written ``\\[``, so
    nothing the text says is swallowed as a style."""
    assert Text.from_markup(text).plain == text.replace("\\[", "["), where


def test_lint_help_shows_its_config_tables() -> None:
    from typer.testing import CliRunner

    out = CliRunner().invoke(app, ["lint", "--help"], terminal_width=200).output
    assert "[tool.guard.lint]" in out and "([lint])" in out


def _render(tables: list[Any]) -> str:
    buf = io.StringIO()
    con = Console(file=buf, width=400, color_system=None, highlight=False)
    for t in tables:
        con.print(t)
    return buf.getvalue()


def test_doctor_details_keep_their_brackets() -> None:
    """The engine's advice "install the package's [re2] extra" once lost its [re2]."""
    checks = [
        Check("matching engine", "off", "install the package's [re2] extra: pip install 'x[re2]'"),
        Check("[bold]name[/]", "broken", "a [red]detail[/red] and [tool.guard.lint]"),
    ]
    out = _render(doctor_tables(checks[:1], checks[1:]))
    for c in checks:
        assert c.name in out and c.detail in out, out


def test_every_real_doctor_line_renders_as_written() -> None:
    from guard.setup.doctor import host_checks, layer_checks

    hosts, layers = host_checks(), layer_checks()
    out = _render(doctor_tables(hosts, layers))
    for c in [*hosts, *layers]:
        assert c.detail in out, c
