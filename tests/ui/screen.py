"""Read a running cockpit's screen as text, the way a person would see it."""

from __future__ import annotations

import io

from rich.console import Console
from textual.app import App


def screen_text(app: App[object]) -> str:
    """The whole screen as plain text, one line per row."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    render = app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens, simplify=True
    )
    console.print(render)
    return console.export_text(styles=False)
