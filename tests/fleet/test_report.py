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

from guard.audit.sinks import AuditLog
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


def shipped(logs: Path) -> list[dict[str, Any]]:
    """Every record of the machines' local logs as guard's shipper sends it: with the MAC
    it continues from (``chain_prev``) and its log's name (``chain_log``)."""
    out = []
    for path in sorted(logs.glob("*.jsonl")):
        prev = ""
        for line in path.read_text().splitlines():
            r = json.loads(line)
            out.append({**r, "chain_prev": prev, "chain_log": path.name})
            prev = r["chain"]
    return out


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
    digest_of = {r["hostname"]: r["policy_digest"] for r in shipped(logs)}
    assert digest_of["m1"] == digest_of["m2"] != digest_of["m3"]
    v = Violation("2026-12-04T10:00:00.000000Z", "s-m2", "plan", "modified", "src/app.py",
                  "agents.plan.write.default", "write denied", "reported").to_json()
    AuditLog(logs / "m2.jsonl").write(
        stamp(v, None) | {"hostname": "m2", "policy_digest": digest_of["m2"]})
    n = Notice("2026-12-04T10:00:01.000000Z", "s-m3", "server_unconfined",
               "Landlock is unavailable: the MCP server runs unconfined").to_json()
    AuditLog(logs / "m3.jsonl").write(
        stamp(n, None) | {"hostname": "m3", "policy_digest": digest_of["m3"]})
    records = shipped(logs)
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


def review_json(path: Path, repo: Path, *args: str | Path) -> tuple[int, dict[str, Any]]:
    got = run_guard("review", "--fleet", path, "--format", "json", *args, cwd=repo)
    assert got.stdout, got.stderr
    return got.returncode, json.loads(got.stdout)


def test_one_forged_record_cannot_hide_a_machine(
    fleet: tuple[Path, Path, list[dict[str, Any]]], repo: Path, tmp_path: Path
) -> None:
    """Attack: one record handed to the syslog pipeline claims to be m3's newest, on the
    fleet's current policy, as a shipper's notice ("source": "ship", no chain keys), so
    that m3 would no longer show as stale. It is unverifiable: named, counted for nothing,
    m3 stays stale, and `guard audit verify --shipped` fails on it. A forged copy of a real
    record with its chain keys is caught once the machines' key is given."""
    from guard.audit.chain import key_path

    central, _, records = fleet
    current = next(r["policy_digest"] for r in records if r["hostname"] == "m1")
    forged = {"type": "notice", "source": "ship", "event": "not_shipped", "hostname": "m3",
              "ts": "2099-01-01T00:00:00.000000Z", "policy_digest": current,
              "record_id": "forged-notice", "uid": 0}
    copied = {**records[2], "decision": "allow", "record_id": "forged-copy"}
    attacked = tmp_path / "attacked.jsonl"
    attacked.write_text(central.read_text() + json.dumps(forged) + "\n"
                        + json.dumps(copied) + "\n")
    code, doc = review_json(attacked, repo)
    assert code == 3 and doc["stale_policy"] == ["m3"], doc["stale_policy"]
    assert doc["records"] == 24 and doc["unverifiable_records"] == 1, doc
    assert doc["unverifiable_hosts"] == ["m3"]
    assert doc["unverifiable"][0]["problem"].startswith("no chain keys and no notice signature")
    assert doc["macs_checked"] is False and doc["unchecked_records"] == 24
    code, doc = review_json(attacked, repo, "--key", key_path())
    assert code == 3 and doc["records"] == 23 and doc["unverifiable_records"] == 2, doc
    assert doc["macs_checked"] is True and doc["unchecked_records"] == 0
    assert "the MAC does not match" in doc["unverifiable"][1]["problem"]
    table = run_guard("review", "--fleet", attacked, "--key", key_path(), cwd=repo).stdout
    assert "unverifiable records (counted for nothing): 2: m1 (1), m3 (1)" in table, table
    verify = run_guard("audit", "verify", "--shipped", attacked, "--key", key_path(), "--json",
                       cwd=repo)
    assert verify.returncode == 1, verify.stdout
    problems = [f["problem"] for f in json.loads(verify.stdout)["findings"]]
    assert any(p.startswith("no chain keys and no notice signature") for p in problems)


def test_the_genuine_fleet_verifies_with_its_key_and_a_cut_chain_is_named(
    fleet: tuple[Path, Path, list[dict[str, Any]]], repo: Path, tmp_path: Path
) -> None:
    """With the key every record of the collector's file and of the machines' logs verifies
    (none left unchecked); a record removed from the collector's file is named as missing
    from its chain."""
    from guard.audit.chain import key_path

    central, logs, _ = fleet
    for path in (central, logs):
        _, doc = review_json(path, repo, "--key", key_path())
        assert doc["records"] == 23 and doc["unverifiable_records"] == 0, doc["unverifiable"]
        assert doc["unchecked_records"] == 0 and doc["chain_gaps"] == []
    lines = central.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:5] + lines[6:]) + "\n")  # not one resent at the end
    code, doc = review_json(cut, repo, "--key", key_path())
    assert code == 3 and [(g["hostname"], g["missing"]) for g in doc["chain_gaps"]] == [
        (json.loads(lines[5])["hostname"], 1)], doc["chain_gaps"]


def test_a_shipper_notice_counts_only_with_guards_signature(
    repo: Path, tmp_path: Path
) -> None:
    """guard's shipper signs its not-shipped notice with the installation's key; the
    collector's check accepts it, and the same notice edited (or unsigned) is an error."""
    from guard.audit.chain import key_path, load_key
    from guard.fleet.syslog import sign_notice

    load_key(key_path())  # the installation's key, as the first audit record makes it
    notice = stamp({"type": "notice", "source": "ship", "event": "not_shipped",
                    "message": "3 audit records were not shipped", "count": 3}, None)
    sign_notice(notice, key_path().parent.parent / "spool" / "syslog-x")
    assert "notice_mac" in notice
    edited = {**notice, "count": 0, "record_id": "edited"}
    unsigned = {k: v for k, v in notice.items() if k != "notice_mac"} | {"record_id": "bare"}
    for rows, code in (([notice], 0), ([notice, edited], 1), ([notice, unsigned], 1)):
        path = tmp_path / "central.jsonl"
        path.write_text("".join(body(r).decode() + "\n" for r in rows))
        got = run_guard("audit", "verify", "--shipped", path, "--key", key_path(), "--json",
                        cwd=repo)
        assert got.returncode == code, got.stdout + got.stderr
        out = json.loads(got.stdout)
        assert any("its signature verifies" in n["problem"] for n in out["notes"])
        _, doc = review_json(path, repo, "--key", key_path())
        assert doc["records"] == 1 and doc["unverifiable_records"] == len(rows) - 1
