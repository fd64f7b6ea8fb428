"""`guard plan exit --approve` binds to the digest of the plan's exact bytes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from typer.testing import CliRunner

from guard.cli import app
from guard.effects import GuardError
from guard.planning import Mode, Session

from .conftest import write_plan_file

runner = CliRunner()


def _guard(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    if isinstance(result.exception, GuardError):
        return 2, str(result.exception)
    return result.exit_code, result.output


def test_status_and_show_print_the_digest_that_approve_takes(
    plan_session: Session, repo: Path
) -> None:
    path = write_plan_file(plan_session, "# Plan\r\n\r\n1. step\r\n")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    code, out = _guard("plan", "status", "--cwd", str(repo), "--json")
    assert code == 0 and json.loads(out)["plan_sha256"] == digest
    assert json.loads(out)["plan_lines"] == 3
    assert digest in _guard("plan", "show", "--cwd", str(repo))[1].replace("\n", "")
    code, out = _guard("plan", "exit", "--approve", "--digest", digest, "--cwd", str(repo))
    assert code == 0, out
    stored = plan_session.refresh()
    assert stored.mode is Mode.BUILD and stored.decisions[-1].plan_sha256 == digest


def test_a_digest_of_another_text_approves_nothing(plan_session: Session, repo: Path) -> None:
    """Attack: the plan was swapped after the user read it and copied its digest."""
    shown = write_plan_file(plan_session, "# Plan\n\n1. harmless\n").read_bytes()
    write_plan_file(plan_session, "# Plan\n\n1. rm -rf ~ \n")
    code, out = _guard("plan", "exit", "--approve", "--digest",
                       hashlib.sha256(shown).hexdigest(), "--cwd", str(repo))  # fmt: skip
    assert code == 2 and "changed while the user was reviewing it" in out
    assert plan_session.refresh().mode is Mode.PLAN
    assert plan_session.decisions[-1].decision == "refused"


def test_a_malformed_digest_or_one_without_approve_is_a_clear_error(
    plan_session: Session, repo: Path
) -> None:
    write_plan_file(plan_session)
    code, out = _guard("plan", "exit", "--approve", "--digest", "abc", "--cwd", str(repo))
    assert code == 2 and "64 lowercase hex" in out
    code, out = _guard("plan", "exit", "--refine", "x", "--digest", "0" * 64, "--cwd", str(repo))
    assert code == 2 and "--digest goes with --approve" in out
    assert plan_session.refresh().mode is Mode.PLAN


def test_a_script_approving_without_digest_is_told_the_digest(
    plan_session: Session, repo: Path
) -> None:
    path = write_plan_file(plan_session)
    code, out = _guard("plan", "exit", "--approve", "--cwd", str(repo))
    assert code == 0
    assert hashlib.sha256(path.read_bytes()).hexdigest() in out
    assert "approving plan Add a greeting (3 lines, digest" in out
