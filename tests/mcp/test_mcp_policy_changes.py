"""A policy changed on disk while `guard mcp` runs decides the proxy's very next call.

The proxy compiles its policy once and keeps it while its files read the same
(guard/policy/freshness.py: a stat per file and call, the content compared while a
change is too recent for its time stamp to prove anything). Attack: the user tightens
the policy (a secret the plan agent must no longer read) in the middle of an agent's
session; a proxy that kept its start-up policy would go on serving the secret. Each
test runs the real `guard mcp` in front of the real filesystem server and checks what
the client got back.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "mcp"))

from fsserver import served_project  # noqa: E402
from rawclient import RawClient  # noqa: E402

SECRET = "token = 'do-not-read'\n"
#: two policies of the same size (a rewrite the file's size and a coarse clock cannot tell)
OPEN = 'version = 1\nextends = ["builtin:default"]\n[agents.plan.read]\ndeny = ["src/secreT.txt"]\n'
SHUT = 'version = 1\nextends = ["builtin:default"]\n[agents.plan.read]\ndeny = ["src/secret.txt"]\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = served_project(tmp_path)
    (root / "src" / "secret.txt").write_text(SECRET)
    return root


def read_secret(client: RawClient, project: Path, msg_id: int) -> tuple[bool, str]:
    """(refused, the text the client got) for a read of src/secret.txt."""
    answer = client.call("read_text_file", {"path": str(project / "src" / "secret.txt")}, msg_id)
    result = answer["result"]
    return result.get("isError") is True, result["content"][0]["text"]


def test_a_policy_rewritten_mid_session_refuses_the_next_read(
    fs_server: Path, project: Path
) -> None:
    policy = project / ".openoxide" / "policy.toml"
    policy.parent.mkdir(exist_ok=True)
    policy.write_text(OPEN)
    assert len(OPEN) == len(SHUT)
    client = RawClient([], project, [str(fs_server), str(project)])
    try:
        client.initialize()
        refused, text = read_secret(client, project, 1)
        assert not refused and text == SECRET
        policy.write_text(SHUT)  # at once: same size, very likely the same clock tick
        refused, text = read_secret(client, project, 2)
        assert refused, text
        assert "do-not-read" not in text
        assert "src/secret.txt" in text  # the rule that refused it
        assert "the policy changed on disk" in client.stderr()
    finally:
        client.close()


def test_a_policy_file_created_mid_session_takes_over_from_the_default(
    fs_server: Path, project: Path
) -> None:
    client = RawClient([], project, [str(fs_server), str(project)])
    try:
        client.initialize()
        refused, text = read_secret(client, project, 1)
        assert not refused and text == SECRET  # the built-in default lets plan mode read it
        policy = project / ".openoxide" / "policy.toml"
        policy.parent.mkdir(exist_ok=True)
        policy.write_text(SHUT)
        refused, text = read_secret(client, project, 2)
        assert refused and "do-not-read" not in text, text
    finally:
        client.close()


def test_a_policy_broken_mid_session_refuses_calls_until_it_loads_again(
    fs_server: Path, project: Path
) -> None:
    policy = project / ".openoxide" / "policy.toml"
    policy.parent.mkdir(exist_ok=True)
    policy.write_text(OPEN)
    client = RawClient([], project, [str(fs_server), str(project)])
    try:
        client.initialize()
        assert read_secret(client, project, 1) == (False, SECRET)
        policy.write_text("version = 1\n[agents.plan.read]\ndeny = 5\n")
        for msg_id in (2, 3):  # fail closed, on every call while it stays broken
            refused, text = read_secret(client, project, msg_id)
            assert refused and "do-not-read" not in text, text
            assert "policy.toml" in text, text
        policy.write_text(OPEN)
        assert read_secret(client, project, 4) == (False, SECRET)
    finally:
        client.close()
