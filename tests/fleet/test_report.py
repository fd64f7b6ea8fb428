"""``guard review --fleet``: a fleet made of real guard processes, each in its own UTS
namespace (its own host name), read from the central JSON lines and from audit logs; the
HTML page rendered in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from replay.test_replay_html import rendered

from guard.fleet import report as fleet_report
from guard.fleet.records import missing, stamp
from guard.fleet.syslog import body
from guard.monitor.events import Notice, Violation

from .conftest import run_guard

EMIT = textwrap.dedent("""\
    import sys
    from pathlib import Path
    from guard.audit.sinks import AuditLog
    from guard.effects import Effect, ToolCall
    from guard.gate import Gate
    repo, log, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    gate = Gate(sink=AuditLog(log), source="check", agent="plan")
    for i in range(n):
        call = ToolCall("effect", "write", {}, repo, session=f"{sys.argv[4]}-{i % 2}")
        e = Effect.write(f"src/f{i}.py") if i % 3 else Effect.write(f".openoxide/plans/p{i}.md")
        gate.record(gate.decide(call, effects=[e]))
""")


def machine(name: str, repo: Path, log: Path, n: int) -> None:
    """``n`` decisions by guard on machine ``name`` (a UTS namespace with that host name)."""
    proc = subprocess.run(
        ["unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"', name, sys.executable,
         "-c", EMIT, str(repo), str(log), str(n), name],
        capture_output=True, text=True, timeout=120, check=False, cwd=repo)
    assert proc.returncode == 0, proc.stderr


def policy(repo: Path, extra: str = "") -> None:
    (repo / ".openoxide" / "policy.toml").write_text(
        'version = 1\nextends = ["builtin:default"]\n' + extra)


@pytest.fixture
def fleet(repo: Path, tmp_path: Path) -> tuple[Path, Path, list[dict[str, Any]]]:
    """Three machines: m1 and m2 on the current policy, m3 on an older one; m2's monitor
    saw a violation, m3 ran an MCP server unconfined. Returns (central file, audit log
    directory, every record)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    policy(repo, '\n[agents.plan.read]\nask = [".env"]\n')  # the old policy
    machine("m3", repo, logs / "m3.jsonl", 6)
    policy(repo)  # the current one
    machine("m1", repo, logs / "m1.jsonl", 9)
    machine("m2", repo, logs / "m2.jsonl", 6)
    records = [json.loads(line) for p in sorted(logs.glob("*.jsonl"))
               for line in p.read_text().splitlines()]
    digest_of = {r["hostname"]: r["policy_digest"] for r in records}
    assert digest_of["m1"] == digest_of["m2"] != digest_of["m3"]
    extra = []
    v = Violation("2026-12-04T10:00:00.000000Z", "s-m2", "plan", "modified", "src/app.py",
                  "agents.plan.write.default", "write denied", "reported").to_json()
    extra.append(stamp(v, None) | {"hostname": "m2", "policy_digest": digest_of["m2"]})
    n = Notice("2026-12-04T10:00:01.000000Z", "s-m3", "server_unconfined",
               "Landlock is unavailable: the MCP server runs unconfined").to_json()
    extra.append(stamp(n, None) | {"hostname": "m3", "policy_digest": digest_of["m3"]})
    with open(logs / "m2.jsonl", "a") as f:
        f.write(json.dumps(extra[0]) + "\n")
    with open(logs / "m3.jsonl", "a") as f:
        f.write(json.dumps(extra[1]) + "\n")
    records += extra
    central = tmp_path / "central.jsonl"
    lines = [body(r).decode() for r in records]
    lines += lines[:4]  # RELP resent these after an outage
    central.write_text("\n".join(lines) + "\n")
    return central, logs, records


def test_every_record_carries_the_fleet_fields(
    fleet: tuple[Path, Path, list[dict[str, Any]]]
) -> None:
    _, _, records = fleet
    for r in records:
        assert not missing(r), r
    assert len({r["record_id"] for r in records}) == len(records)
    assert {r["hostname"] for r in records} == {"m1", "m2", "m3"}


def test_table_json_and_audit_log_directory_agree(
    fleet: tuple[Path, Path, list[dict[str, Any]]], repo: Path
) -> None:
    central, logs, records = fleet
    table = run_guard("review", "--fleet", central, cwd=repo)
    assert table.returncode == 3, table.stderr  # findings: stale, skipped, unconfined
    assert "23 records from 3 machines" in table.stdout
    assert "4 duplicates dropped" in table.stdout
    assert re.search(r"^m3 .* STALE$", table.stdout, re.M)
    assert "stale policy: m3" in table.stdout
    assert "hooks skipped (monitor violations): m2" in table.stdout
    assert "confinement unavailable: m3" in table.stdout
    got = run_guard("review", "--fleet", central, "--format", "json", cwd=repo)
    doc = json.loads(got.stdout)
    assert doc["schema_version"] == 1 and doc["records"] == 23 and doc["duplicates"] == 4
    assert doc["stale_policy"] == ["m3"] and doc["hooks_skipped"] == ["m2"]
    assert doc["confinement_unavailable"] == ["m3"]
    assert doc["sessions"] == 2 + 2 + 2 + 2  # two per machine, plus m2's and m3's monitors
    denied = sum(1 for r in records if r.get("decision") == "deny")
    assert sum(c.get("deny", 0) for c in doc["decisions_by_agent"].values()) == denied
    assert doc["top_rules"][0]["rule"] == "agents.plan.write.default"
    from_logs = json.loads(run_guard("review", "--fleet", logs, "--format", "json",
                                     cwd=repo).stdout)
    assert from_logs["duplicates"] == 0
    for key in ("records", "stale_policy", "hooks_skipped", "decisions_by_agent", "top_rules"):
        assert from_logs[key] == doc[key], key


def test_split_reading_equals_one_reader(
    fleet: tuple[Path, Path, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    central, _, _ = fleet
    one = fleet_report.build(central, workers=1).to_json()
    monkeypatch.setattr(fleet_report, "SPLIT_BYTES", 1000)
    split = fleet_report.build(central, workers=3).to_json()
    assert split["records"] + split["duplicates"] == one["records"] + one["duplicates"]
    for key in ("machines", "stale_policy", "decisions_by_agent", "top_rules"):
        assert split[key] == one[key], key


def test_html_report_renders_charts(
    fleet: tuple[Path, Path, list[dict[str, Any]]], repo: Path, tmp_path: Path
) -> None:
    central, _, _ = fleet
    page = tmp_path / "fleet.html"
    got = run_guard("review", "--fleet", central, "--format", "html", "-o", page, cwd=repo)
    assert got.returncode == 3 and f"wrote {page}" in got.stderr
    source = page.read_text()
    assert not re.search(r"(src|href)=|@import|url\(", source)  # self-contained
    dom = rendered(page, tmp_path / "profile")
    text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
    assert "guard fleet report" in text and "23 records from 3 machines" in text
    for heading in ("Decisions over time", "Top rules", "Machines \u00d7 policy digest"):
        assert heading in text
    assert dom.count('class="bar ') >= 2  # stacked bars: allow and deny
    assert 'class="rule-bar"' in dom
    assert len(re.findall(r'class="num cell"', dom)) == 3 * 2  # 3 machines x 2 digests
    assert "stale policy: m3" in text and "hooks skipped (monitor violations): m2" in text
    assert os.path.getsize(page) < 200_000


def test_lines_that_are_not_records_are_counted_and_located(
    fleet: tuple[Path, Path, list[dict[str, Any]]], repo: Path, tmp_path: Path
) -> None:
    central, _, _ = fleet
    bad = tmp_path / "bad.jsonl"
    good = central.read_bytes()
    bad.write_bytes(good + b'{"hostname": ["not", "a", "name"], "type": "verdict"}\nnot json\n')
    got = run_guard("review", "--fleet", bad, cwd=repo)
    assert got.returncode == 3 and "Traceback" not in got.stderr
    assert "23 records from 3 machines" in got.stdout
    assert f"2 lines were not records ({bad}: the record at byte {len(good)} has a field" in (
        got.stdout)
    missing_path = run_guard("review", "--fleet", tmp_path / "nope", cwd=repo)
    assert missing_path.returncode == 2 and "no such file or directory" in missing_path.stderr
