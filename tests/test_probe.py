"""One description of each layer: --version, doctor, review and run --explain read one
probe (guard/probe.py); an editable install says that its hooks point into the checkout;
the hook daemon's lifetime is configurable and said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard import probe
from guard.hooks.hookd import idle_seconds
from guard.sandbox import landlock

ROOT = Path(__file__).resolve().parents[1]


def guard(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ), check=False)


def test_version_tells_which_installation_runs_and_what_it_can_use(repo: Path) -> None:
    lay = probe.layers(repo)
    out = guard("--version", cwd=repo).stdout
    assert f"installed at {ROOT / 'guard'}" in out
    assert f"(editable: runs the checkout {ROOT})" in out  # this checkout's venv is editable
    assert f"Python {sys.version.split()[0]}" in out
    assert lay.engine in out
    assert lay.landlock_line() in out and lay.namespaces_line() in out
    abi = landlock.abi_version()
    assert (f"Landlock ABI {abi}" if abi else "no Landlock") in out


def test_doctor_review_and_run_describe_the_layers_as_the_probe_does(repo: Path) -> None:
    """review once said the monitor used inotify while doctor and run said fanotify."""
    lay = probe.layers(repo)
    doctor = json.loads(guard("doctor", "--json", cwd=repo).stdout)["layers"]
    detail = {c["name"]: c["detail"] for c in doctor}
    assert detail["monitor"] == lay.monitor
    assert lay.landlock_line() in detail["kernel confinement"] or lay.landlock in detail[
        "kernel confinement"]
    assert f"installed at {ROOT / 'guard'}" in detail["installation"]
    review = json.loads(guard("review", "--format", "json", cwd=repo).stdout)
    layers = {x["layer"]: x for x in review["layers"]}
    assert lay.monitor in layers["monitor"]["detail"]
    assert "installed at" in layers["installation"]["detail"]
    explain = json.loads(guard("run", "--explain", cwd=repo).stdout)
    assert explain["monitor"] == lay.monitor and explain["landlock_abi"] == lay.landlock_abi
    assert explain["guard"]["package"] == str(ROOT / "guard")


def test_install_warns_that_an_editable_hook_points_into_the_checkout(repo: Path) -> None:
    r = guard("install", "claude-code", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert "guard: warning: guard is an editable install" in r.stderr
    assert str(ROOT) in r.stderr and "install guard without -e" in r.stderr


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(None, 600.0), ("30", 30.0), ("2.5", 2.5), ("abc", 600.0), ("0", 600.0), ("-5", 600.0),
     ("inf", 600.0), ("nan", 600.0), ("", 600.0)],
)
def test_hook_daemon_lifetime_is_configurable(value: str | None, seconds: float) -> None:
    env = {} if value is None else {"GUARD_HOOKD_IDLE": value}
    assert idle_seconds(env) == seconds


def test_doctor_says_how_long_the_hook_daemon_lives(repo: Path) -> None:
    env = {**os.environ, "GUARD_HOOKD_IDLE": "45"}
    r = subprocess.run([sys.executable, "-m", "guard", "doctor", "--json"], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    detail = {c["name"]: c["detail"] for c in json.loads(r.stdout)["layers"]}
    assert "exits after 45 s without a call" in detail["hook daemon"]
