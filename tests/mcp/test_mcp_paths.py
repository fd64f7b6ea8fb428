"""guard/mcp/file_uris.py: every path a server may open for a tool's path argument is decided.

The readings on a real directory tree (symlinks, Unicode look-alikes); their effect
through real servers is tests/e2e/test_mcp_parsers.py.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest

from guard.effects import Effect, EffectKind, GuardError
from guard.mcp.file_uris import readings, unicode_equivalent


def targets(effects: list[Effect]) -> list[str | None]:
    return [e.target for e in effects]


def test_dotdot_is_read_both_through_the_symlink_and_as_text(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "link").symlink_to("a/b")
    path = str(tmp_path / "link" / ".." / "x")
    found = readings([Effect.write(path, "w")], str(tmp_path), guessed=False, arguments={})
    assert targets(found) == [path, str(tmp_path / "x")]  # the kernel's is guard's own
    assert all(e.kind is EffectKind.WRITE for e in found)


def test_a_leading_tilde_is_also_a_directory_named_tilde(tmp_path: Path) -> None:
    found = readings([Effect.read("~/notes", "r")], str(tmp_path), guessed=False, arguments={})
    assert targets(found) == ["~/notes", "./~/notes"]


def test_a_missing_name_is_also_its_existing_nfc_twin(tmp_path: Path) -> None:
    """The filesystem server opens an existing entry whose NFC form equals a missing one."""
    nfc = unicodedata.normalize("NFC", "caf\u00e9")
    nfd = unicodedata.normalize("NFD", nfc)
    (tmp_path / nfc).mkdir()
    (tmp_path / nfc / "secret.txt").write_text("s")
    asked = os.path.join(str(tmp_path), nfd, "secret.txt")
    assert unicode_equivalent(asked) == str(tmp_path / nfc / "secret.txt")
    found = readings([Effect.read(asked, "r")], str(tmp_path), guessed=False, arguments={})
    assert str(tmp_path / nfc / "secret.txt") in targets(found)
    assert unicode_equivalent(str(tmp_path / nfc / "secret.txt")) is None  # it exists


def test_two_nfc_twins_are_refused(tmp_path: Path) -> None:
    """Combining marks in three orders are one name under NFC: with two of them on disk, the
    third (missing) has two twins; the server refuses it, and so does guard."""
    one, two, three = "q\u031b\u0323\u0307", "q\u0307\u0323\u031b", "q\u0323\u0307\u031b"
    assert len({unicodedata.normalize("NFC", n) for n in (one, two, three)}) == 1
    (tmp_path / one).mkdir()
    (tmp_path / two).mkdir()
    with pytest.raises(GuardError, match="NFC"):
        unicode_equivalent(str(tmp_path / three / "x"))


def test_file_uris_anywhere_in_an_unknown_tools_arguments_are_read_and_written() -> None:
    arguments = {"target": {"deep": ["x", "file:///r/a%20b"]}, "n": 1}
    found = readings([], "/", guessed=True, arguments=arguments)
    assert [(e.kind, e.target) for e in found] == [
        (EffectKind.READ, "/r/a b"), (EffectKind.WRITE, "/r/a b")
    ]
    assert readings([], "/", guessed=False, arguments=arguments) == []  # a known tool's data
    with pytest.raises(GuardError, match="backslash"):
        readings([], "/", guessed=True, arguments={"to": "file:///r/src\\..\\.env"})


def test_a_file_uri_given_as_a_path_is_also_the_path_it_names() -> None:
    found = readings([Effect.read("file:///r/.env", "r")], "/w", guessed=False, arguments={})
    assert targets(found) == ["file:///r/.env", "/r/.env"]
