"""The HTML report, loaded in headless Chromium (Debian's `chromium`): the rendered text."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from components import require_component

from .test_replay import guard


def rendered(page: Path, profile: Path) -> str:
    chromium = require_component("chromium (Debian package)", shutil.which("chromium"),
                                 "apt-get install chromium")
    proc = subprocess.run(
        [str(chromium), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0 and "<body" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def test_html_report_renders_the_timeline_blocked_calls_and_summary(
    sessions: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, _ = sessions
    page = tmp_path / "review.html"
    proc = guard("replay", "--format", "html", "-o", page, folder)
    assert proc.returncode == 3, proc.stderr
    source = page.read_text()
    assert not re.search(r"(src|href)=|@import|url\(", source)  # self-contained: no fetches
    dom = rendered(page, tmp_path / "profile")
    text = re.sub(r"<[^>]+>", " ", dom)
    text = " ".join(text.split())
    assert "guard replay: what the plan agent would have done" in text
    for host in ("claude-code", "codex", "gemini", "opencode"):
        assert f"{host} session" in text
    assert text.count("DENY") == 8 and text.count("ALLOW") == 12
    assert "sed -i 's/hello/owned/' src/app.py" in text
    assert "no rule matches; agents.plan.write.default is deny" in text  # the reason shown
    assert "calls 20 sessions 4 allowed 12 asked 0 denied 8" in text
    assert "Blocked calls by rule 8 agents.plan.write.default" in text
    assert dom.count('class="deny"') == 8  # highlighted rows
