"""`guard review --transcripts`: the section on what the plan agent would have blocked."""

from __future__ import annotations

import json
from pathlib import Path

from .test_replay import guard


def test_review_counts_the_calls_the_plan_agent_would_have_blocked(
    sessions: tuple[Path, Path]
) -> None:
    folder, repo = sessions
    proc = guard("review", "--transcripts", folder, cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "## Past sessions" in proc.stdout
    assert "In these 4 sessions the plan agent would have blocked 8 calls" in proc.stdout
    assert "| 8 | agents.plan.write.default |" in proc.stdout
    doc = json.loads(guard("review", "--format", "json", "--transcripts", folder,
                           cwd=repo).stdout)
    assert doc["transcripts"]["blocked"] == 8 and doc["transcripts"]["sessions"] == 4
    assert doc["transcripts"]["top_rules"] == [{"rule": "agents.plan.write.default",
                                                "calls": 8}]
    assert "transcripts" not in json.loads(guard("review", "--format", "json",
                                                 cwd=repo).stdout)


def test_review_with_a_bad_transcript_is_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text("{not json\n{}\n")
    proc = guard("review", "--transcripts", bad, cwd=tmp_path)
    assert proc.returncode == 2 and f"{bad}:1: not JSON" in proc.stderr
