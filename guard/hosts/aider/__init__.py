"""Aider: the host record. It has no hooks: ``guard run -- aider`` confines it
(tests/e2e/test_aider_cli.py)."""

from guard.hosts.interface import Host

HOST = Host(
    name="aider",
    title="Aider",
    version="0.86.2",
)
