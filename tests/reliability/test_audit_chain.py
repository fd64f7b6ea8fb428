"""The audit log's HMAC chain and `guard audit verify`, through the real CLI and real files.

Each tampering test is an attack on a log written by guard for real (`guard check
--audit-log`, the same gate and fleet envelope the hooks use): the attacker edits the
file as a user with write access could, and `guard audit verify` must name the line
and exit 1.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from guard.audit import AuditError, logfile, verify
from guard.audit.chain import CHAIN_KEYS, load_key
from guard.audit.logfile import MAX_BYTES_ENV, Appender


def guard(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUARD_", "XDG_"))}
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "guard", *args], capture_output=True, text=True, cwd=cwd,
        env=env, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return h


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    (r / "src").mkdir(parents=True)
    (r / "src" / "app.py").write_text("print('hello')\n")
    subprocess.run(["git", "init", "-q", str(r)], check=True)
    return r


def written_log(home: Path, repo: Path, n: int = 5) -> Path:
    """A log of ``n`` verdicts written by `guard check --audit-log`, as the hooks write."""
    log = home / "audit.jsonl"
    for i in range(n):
        proc = guard(home, "check", "--audit-log", str(log), "--agent", "plan", "write",
                     f"src/f{i}.py", cwd=repo)  # fmt: skip
        assert proc.returncode == 1, proc.stderr  # plan mode: a deny, recorded
    return log


def key_file(home: Path) -> Path:
    return home / ".local/share/openoxide/keys/audit.key"


def test_the_key_is_made_once_0600_in_a_0700_directory(home: Path, repo: Path) -> None:
    log = written_log(home, repo, 2)
    key = key_file(home)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    first = key.read_bytes()
    assert len(first) == 32
    written_log(home, repo, 1)
    assert key.read_bytes() == first
    records = list(logfile.read(log))
    assert [r["chain_seq"] for r in records] == [1, 2, 3]
    assert all(len(r["chain"]) == 64 for r in records)
    proc = guard(home, "audit", "verify", str(log))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 records, chain intact" in proc.stdout


def test_every_record_field_is_covered_fleet_envelope_included(home: Path, repo: Path) -> None:
    """Attack: rewrite who and where a record says it came from (the fleet fields a
    security team joins on), or its decision; each edit breaks that record's MAC."""
    log = written_log(home, repo, 3)
    original = log.read_text()
    record = json.loads(original.splitlines()[1])
    for k in ("hostname", "user", "uid", "record_id", "session", "policy_digest", "decision"):
        assert k in record, k
    for field, value in (("hostname", "elsewhere"), ("user", "alice"), ("decision", "allow"),
                         ("record_id", "0" * 8), ("policy_digest", "sha256:0")):  # fmt: skip
        lines = original.splitlines()
        edited = json.loads(lines[1])
        edited[field] = value
        chain = {k: edited.pop(k) for k in CHAIN_KEYS}
        text = json.dumps(edited, sort_keys=True, ensure_ascii=False)
        lines[1] = text[:-1] + f', "chain_seq": {chain["chain_seq"]}, "chain": "{chain["chain"]}"}}'
        log.write_text("\n".join(lines) + "\n")
        proc = guard(home, "audit", "verify", str(log))
        assert proc.returncode == 1, (field, proc.stdout)
        assert f"{log}:2: the MAC does not match" in proc.stdout, (field, proc.stdout)
        assert f"{log}:1:" not in proc.stdout and f"{log}:3:" not in proc.stdout


def _forge(lines: list[str]) -> list[str]:
    fake = dict(json.loads(lines[1]), decision="allow", agent="build")
    fake["chain_seq"] = len(lines) + 1
    fake["chain"] = "ab" * 32
    return [*lines, json.dumps(fake)]


def _forge_unchained(lines: list[str]) -> list[str]:
    fake = json.loads(lines[1])
    for k in CHAIN_KEYS:
        fake.pop(k)
    return [*lines[:2], json.dumps(dict(fake, decision="allow")), *lines[2:]]


TAMPERING: dict[str, tuple[Callable[[list[str]], list[str]], int, str]] = {
    # kind: (what the attacker does to the lines, the line named, what is said)
    "forged": (_forge, 6, "the MAC does not match"),
    "forged-unchained": (_forge_unchained, 3, "no chain MAC"),
    "edited": (lambda ls: [ls[0], ls[1].replace('"deny"', '"allow"', 1), *ls[2:]], 2,
               "the MAC does not match"),
    "reordered": (lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], 3,
                  "record 2 comes after record 3"),
    "deleted": (lambda ls: [*ls[:2], *ls[3:]], 3, "record 3 is missing before this line"),
    "deleted-first": (lambda ls: ls[1:], 1, "record 1 is missing at the start"),
    "repeated": (lambda ls: [*ls, ls[1]], 6, "record 2 comes after record 5"),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(TAMPERING))
def test_a_tampered_log_is_reported_with_its_line(home: Path, repo: Path, kind: str) -> None:
    log = written_log(home, repo, 5)
    change, line, said = TAMPERING[kind]
    lines = log.read_text().splitlines()
    log.write_text("\n".join(change(lines)) + "\n")
    proc = guard(home, "audit", "verify", str(log))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{log}:{line}: {said}" in proc.stdout, proc.stdout
    found = json.loads(guard(home, "audit", "verify", str(log), "--json").stdout)
    assert found["intact"] is False and found["schema_version"] == 1
    assert [f["line"] for f in found["findings"]] == [line], found


def test_records_cut_from_the_end_are_found_against_a_saved_head(home: Path, repo: Path) -> None:
    """Attack: delete the newest records (the chain alone cannot tell a shorter log from
    an older one); the head an earlier verify printed, kept elsewhere, tells."""
    log = written_log(home, repo, 4)
    before = json.loads(guard(home, "audit", "verify", str(log), "--json").stdout)
    head = before["head"]
    assert head.startswith("4:")
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:2]))
    plain = guard(home, "audit", "verify", str(log))
    assert plain.returncode == 0  # what the chain alone cannot see: said in SECURITY.md
    proc = guard(home, "audit", "verify", str(log), "--head", head)
    assert proc.returncode == 1
    assert "the anchored head 4:" in proc.stdout and "ends at record 2" in proc.stdout
    written_log(home, repo, 3)  # the log grows again past the head's number: still caught
    proc = guard(home, "audit", "verify", str(log), "--head", head)
    assert proc.returncode == 1 and "does not carry the anchored MAC" in proc.stdout


def test_the_chain_runs_across_rotated_parts_and_a_deleted_part_is_named(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = home / "a.jsonl"
    monkeypatch.setenv(MAX_BYTES_ENV, "600")
    for i in range(12):
        logfile.append({"type": "notice", "i": i, "pad": "x" * 100}, log)
    parts = logfile.rotated(log)
    assert len(parts) >= 3
    assert verify.verify(log, load_key()).intact
    assert [r["chain_seq"] for r in logfile.read(log)] == list(range(1, 13))
    parts[1].unlink()
    result = verify.verify(log, load_key())
    assert [(f.path, f.line) for f in result.findings] == [(parts[2], 1)]
    assert "missing before this line" in result.findings[0].problem


def test_a_killed_writers_torn_tail_is_a_note_and_the_next_record_chains_on(
    home: Path,
) -> None:
    log = home / "a.jsonl"
    logfile.append({"n": 1}, log)
    with open(log, "ab") as fh:
        fh.write(b'{"n": 2, "half')
    torn = verify.verify(log, load_key())
    assert torn.intact and [n.line for n in torn.notes] == [2]
    logfile.append({"n": 3}, log)
    after = verify.verify(log, load_key())
    assert after.intact and after.records == 2 and not after.notes


def test_a_caller_cannot_supply_the_chain_keys(home: Path) -> None:
    log = home / "a.jsonl"
    logfile.append({"n": 1, "chain": "f" * 64, "chain_seq": 99}, log)
    (record,) = logfile.read(log)
    assert record["chain_seq"] == 1 and record["chain"] != "f" * 64
    assert verify.verify(log, load_key()).intact


def test_a_key_others_can_read_is_refused(home: Path, repo: Path) -> None:
    log = written_log(home, repo, 1)
    key_file(home).chmod(0o644)
    proc = guard(home, "audit", "verify", str(log))
    assert proc.returncode == 2
    assert "chmod 600" in proc.stderr and "Traceback" not in proc.stderr
    written = guard(home, "check", "--audit-log", str(log), "--agent", "build", "read",
                    "src/app.py", cwd=repo)  # fmt: skip
    assert written.returncode != 0 and "chmod 600" in written.stderr  # fail closed
    assert len(log.read_text().splitlines()) == 1


@pytest.mark.parametrize("missing", ["key", "log"])
def test_a_missing_key_or_log_is_a_clear_error(home: Path, repo: Path, missing: str) -> None:
    log = written_log(home, repo, 1)
    if missing == "key":
        key_file(home).unlink()
    else:
        log.unlink()
    proc = guard(home, "audit", "verify", str(log))
    assert proc.returncode == 2 and proc.stdout == ""
    assert "Traceback" not in proc.stderr
    if missing == "key":
        assert f"no audit key at {key_file(home)}" in proc.stderr
        assert not key_file(home).exists()  # verify never makes a key
    else:
        assert f"no audit log at {log}" in proc.stderr
    bad = guard(home, "audit", "verify", str(log), "--head", "x")
    assert bad.returncode == 2 and "RECORD:MAC" in bad.stderr


def test_after_a_forged_last_line_the_writer_starts_a_new_chain_and_only_it_is_named(
    home: Path,
) -> None:
    """Attack: append an unchained line; the next genuine record cannot continue from it,
    so the writer starts a new chain, and verify names the forged line alone."""
    log = home / "a.jsonl"
    logfile.append({"n": 1}, log)
    with open(log, "a") as fh:
        fh.write('{"n": 2, "decision": "allow"}\n')
    logfile.append({"n": 3}, log)
    result = verify.verify(log, load_key())
    assert [(f.line, f.problem[:13]) for f in result.findings] == [(2, "no chain MAC:")]
    assert [r.get("chain_seq") for r in logfile.read(log)] == [1, None, 1]


def test_a_forged_record_number_far_ahead_is_named_at_once(home: Path) -> None:
    """Attack on the verifier: a record claiming number 10**17 (or a number too long to
    parse) must be named, not make verify count to it."""
    log = home / "a.jsonl"
    logfile.append({"n": 1}, log)
    for seq in (10**17, int("9" * 40)):
        with open(log, "a") as fh:
            fh.write(json.dumps({"n": 2, "chain_seq": seq, "chain": "ab" * 32}) + "\n")
    result = verify.verify(log, load_key())
    assert [f.line for f in result.findings] == [2, 3]
    assert "records 2 to 99999999999999999 are missing" in result.findings[0].problem
    assert "no chain MAC" in result.findings[1].problem


def test_a_long_lived_writer_notices_a_new_key(home: Path) -> None:
    log = home / "a.jsonl"
    logfile.append({"n": 1}, log)
    key = key_file(home)
    key.unlink()
    logfile.append({"n": 2}, log)  # the same process: makes and uses a new key
    assert key.exists()
    result = verify.verify(log, load_key(create=False))
    assert [f.line for f in result.findings] == [1]  # chained under the old key


def test_doctor_names_the_key_and_a_key_others_can_read_is_broken(
    home: Path, repo: Path
) -> None:
    written_log(home, repo, 1)
    rows = json.loads(guard(home, "doctor", "--json", cwd=repo).stdout)["layers"]
    (row,) = [c for c in rows if c["name"] == "audit log"]
    assert row["status"] == "ok" and str(key_file(home)) in row["detail"]
    key_file(home).chmod(0o640)
    rows = json.loads(guard(home, "doctor", "--json", cwd=repo).stdout)["layers"]
    (row,) = [c for c in rows if c["name"] == "audit log"]
    assert row["status"] == "broken" and "chmod 600" in row["detail"], row


def test_a_writer_that_holds_the_key_stops_when_others_may_read_it(home: Path) -> None:
    log = home / "a.jsonl"
    logfile.append({"n": 1}, log)
    key_file(home).chmod(0o644)
    with pytest.raises(AuditError, match="chmod 600"):
        logfile.append({"n": 2}, log)
    assert len(log.read_text().splitlines()) == 1


def _shipped(records: list[dict[str, object]]) -> str:
    """Records as a collector's file holds them: the shipped JSON body, one a line."""
    from guard.fleet.syslog import body

    return "".join(body(r).decode() + "\n" for r in records)


def test_shipped_records_verify_in_any_order_and_resends_are_a_note(home: Path) -> None:
    """Two writers on one log, shipped in another order than they were chained (each
    writer's spool append comes after its log append), one record resent, non-ASCII
    text escaped on the way: `guard audit verify --shipped` finds the trail intact."""
    log = home / "audit" / "p.jsonl"
    a, b = Appender(log), Appender(log)
    written: list[dict[str, object]] = []
    for i in range(6):
        rec: dict[str, object] = {"type": "verdict", "decision": "deny", "n": i,
                                  "reason": "é ✓ \u2028", "hostname": "m1", "uid": 1000}
        logfile.append_records(a if i % 2 else b, [rec])
        written.append(rec)
    a.close()
    b.close()
    assert [r["chain_seq"] for r in written] == list(range(1, 7))
    assert verify.verify(log, load_key()).intact  # the local log as it was
    arrived = [written[1], written[0], written[2], written[4], written[3], written[3],
               written[5]]
    collector = home / "central.jsonl"
    collector.write_text(_shipped(arrived))
    proc = guard(home, "audit", "verify", "--shipped", str(collector), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["intact"] and out["records"] == 7
    assert [n["problem"].split(" (")[0] for n in out["notes"]] == [
        "1 records received more than once"]
    # another machine's records are left out with --host, and say so
    other = {**written[0], "hostname": "m2"}
    collector.write_text(_shipped([*arrived, other]))
    mine = guard(home, "audit", "verify", "--shipped", str(collector), "--host", "m1")
    assert mine.returncode == 0 and "1 records of other machines not checked" in mine.stdout
    assert guard(home, "audit", "verify", "--shipped", str(collector)).returncode == 1


def test_a_shipped_chain_that_starts_again_is_named(home: Path) -> None:
    """Attack: the local log (not the key) is removed and written anew, so that the
    collector's copy would show only the new trail; the collector has both record 1s."""
    log = home / "audit" / "p.jsonl"
    first = [{"type": "verdict", "n": i, "hostname": "m1", "uid": 1} for i in range(3)]
    logfile.append_many(first, log)
    log.unlink()
    second = [{"type": "verdict", "n": 10 + i, "hostname": "m1", "uid": 1} for i in range(2)]
    logfile.append_many(second, log)
    collector = home / "central.jsonl"
    collector.write_text(_shipped([*first, *second]))
    proc = guard(home, "audit", "verify", "--shipped", str(collector))
    assert proc.returncode == 1
    assert f"{collector}:4: a second record 1 of p.jsonl on m1" in proc.stdout, proc.stdout
    bad = guard(home, "audit", "verify", "--shipped", str(home / "nothing.jsonl"))
    assert bad.returncode == 2 and "cannot read shipped records" in bad.stderr + bad.stdout
    mixed = guard(home, "audit", "verify", str(log), "--host", "m1")
    assert mixed.returncode == 2 and "--shipped" in mixed.stderr + mixed.stdout


def test_a_record_shipped_shortened_keeps_its_place_and_is_named(home: Path) -> None:
    """A record over the message limit is shipped shortened: it keeps its chain keys (the
    next record still links to it), and verify says its MAC can only be checked locally."""
    from guard.fleet import syslog

    log = home / "audit" / "p.jsonl"
    recs: list[dict[str, object]] = [
        {"type": "verdict", "n": 0, "hostname": "m1", "uid": 1},
        {"type": "verdict", "n": 1, "hostname": "m1", "uid": 1, "reason": "x" * 70000},
        {"type": "verdict", "n": 2, "hostname": "m1", "uid": 1},
    ]
    logfile.append_many(recs, log)
    bodies = []
    for r in recs:
        msg = syslog.message(syslog.spool_line(r)[:-1], 4)
        bodies.append(msg[msg.index(b"{"):].decode())
    short = json.loads(bodies[1])
    assert "truncated" in short and short["chain"] == recs[1]["chain"]
    collector = home / "central.jsonl"
    collector.write_text("".join(b + "\n" for b in bodies))
    proc = guard(home, "audit", "verify", "--shipped", str(collector), "--json")
    assert proc.returncode == 1
    [finding] = json.loads(proc.stdout)["findings"]
    assert finding["line"] == 2 and finding["problem"].startswith("shipped shortened")


def test_an_edited_shipped_record_next_to_a_dropped_one_is_named_once_each(home: Path) -> None:
    """Attack at the collector: record 2 turned into an allow, records 3 and 5 removed.
    The edit is named as an edit (not also as missing), the removals as missing."""
    log = home / "audit" / "p.jsonl"
    recs: list[dict[str, object]] = [
        {"type": "verdict", "decision": "deny", "n": i, "hostname": "m1", "uid": 0}
        for i in range(6)]
    logfile.append_many(recs, log)
    recs[1]["decision"] = "allow"
    collector = home / "central.jsonl"
    collector.write_text(_shipped([recs[0], recs[1], recs[3], recs[5]]))
    proc = guard(home, "audit", "verify", "--shipped", str(collector))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{collector}:2: the MAC does not match")
    assert lines[1].startswith(f"{collector}:3: record 3 of p.jsonl on m1 (uid 0) missing")
    assert lines[2].startswith(f"{collector}:4: record 5 of p.jsonl on m1 (uid 0) missing")
    assert lines[3] == f"{collector}: 4 shipped records, 3 problem(s)"
