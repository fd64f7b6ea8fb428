"""Never fail open under load or faults: installed-hook calls while hookd is SIGKILLed.

1,000 calls (``GUARD_LOAD_CALLS``), 16 at a time, each payload distinct; the
daemon is killed at random moments and restarted by the clients. Every call
must get a block or exactly its own payload's decision, and every decision
must be a whole record in the audit log. The latency figures are printed,
never asserted (benchmarks/hook_chaos.py is the same run as a script).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from hook_chaos import chaos

CALLS = int(os.environ.get("GUARD_LOAD_CALLS", "1000"))


def test_no_call_is_lost_or_answered_wrongly_while_hookd_is_killed(
    home: Path, repo: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    report = chaos(home, repo, env, calls=CALLS, parallel=16)
    with capsys.disabled():
        print(f"\n{report.summary()}")
    assert report.problems == []
    assert len(report.calls) == CALLS
    # the run exercised both paths and the faults it is about
    assert report.kills >= 3
    # the clients restarted the daemon after kills
    assert len({c.daemon_pid for c in report.calls} - {None}) >= 2
    assert report.audit_records >= sum(c.exit_code == 0 for c in report.calls)
