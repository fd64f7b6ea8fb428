"""The monitor's own directories cannot be turned off: checked before each use.

Attack: make the quarantine directory unwritable (chmod as the same user, `chattr +i`
as root), then write where the policy forbids. Before, every restore failed and the
path stayed "dirty" for good. Now the quarantine is checked (owner, mode, flags) and
put back before use, the change is reported as tampering, and the write is undone.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guard.monitor import Monitor
from tests.monitor.conftest import holds, wait_for


@pytest.fixture
def unshut(wt: Path) -> Iterator[None]:
    yield
    if os.geteuid() == 0:  # leave nothing pytest cannot delete
        for d in (wt / ".openoxide" / "quarantine").rglob("*"):
            if d.is_dir():
                subprocess.run(["chattr", "-i", "-a", str(d)], check=False,
                               capture_output=True)


def _write_undone(m: Monitor, target: Path, original: bytes, n: int) -> None:
    target.write_text(f"agent {n}\n")
    wait_for(lambda: len([v for v in m.violations if v.path == str(target)]) == n,
             f"write {n} reported")
    wait_for(lambda: holds(target, original), f"write {n} undone")


def test_an_unwritable_quarantine_is_put_back_and_every_write_still_undone(
    wt: Path, start_monitor: Callable[..., Monitor]
) -> None:
    """chmod 500 on the session's quarantine directory and 555 on the quarantine root
    (what the agent can do as the same user): guard puts the modes back, says so as
    tampering, and keeps undoing writes, the first and the next."""
    target = wt / "src" / "app.py"
    original = target.read_bytes()
    m = start_monitor(restore=True)
    _write_undone(m, target, original, 1)
    os.chmod(m.quarantine.session_dir, 0o500)
    os.chmod(m.quarantine.root, 0o555)
    _write_undone(m, target, original, 2)
    _write_undone(m, target, original, 3)
    assert stat.S_IMODE(os.stat(m.quarantine.session_dir).st_mode) == 0o700
    assert any(n.event == "tampering" and "had mode 500" in n.message for n in m.notices)
    assert all("quarantine" in v.action_taken for v in m.violations if v.path == str(target))


def test_an_immutable_quarantine_is_cleared_by_root(
    wt: Path, start_monitor: Callable[..., Monitor], unshut: None
) -> None:
    """`chattr +i` on the session's quarantine directory (root only: the same user
    cannot set it): guard, as root, clears it, says so, and undoes the write."""
    if os.geteuid() != 0:
        pytest.skip("chattr +i needs CAP_LINUX_IMMUTABLE (root); an unprivileged agent"
                    " cannot set it either")
    target = wt / "src" / "app.py"
    original = target.read_bytes()
    m = start_monitor(restore=True)
    _write_undone(m, target, original, 1)
    subprocess.run(["chattr", "+i", str(m.quarantine.session_dir)], check=True)
    _write_undone(m, target, original, 2)
    lsattr = subprocess.run(["lsattr", "-d", str(m.quarantine.session_dir)],
                            capture_output=True, text=True, check=True).stdout
    assert "i" not in lsattr.split()[0]
    assert any(n.event == "tampering" and "immutable" in n.message for n in m.notices)
