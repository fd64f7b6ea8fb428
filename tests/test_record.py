"""guard/record.py's records behave as the dataclasses they replace (built at guard run's
start without :mod:`dataclasses`), and a pattern's regex is compiled only when used."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from guard.cli.run_plain import RunOptions
from guard.effects import Action, Effect
from guard.hosts.interface import Checklist, Host, Planning
from guard.match import Pattern, Source, parse_pattern
from guard.match.reference import _Group, _Rx, _RxClass
from guard.network import parse_network_pattern
from guard.paths import CanonicalPath
from guard.policy.loader import LoadedPolicy
from guard.policy.managed import ManagedLayer, Part
from guard.policy.valid import Agent, Audit, Egress, NetworkRules, Policy, Rules, Sandbox
from guard.record import Record
from guard.sandbox.roots import SandboxPlan, WritableRoot

RECORDS: list[type[Record]] = [
    Source, Pattern, Planning, Checklist, Host, _Rx, _RxClass, _Group, CanonicalPath,
    LoadedPolicy, Part, ManagedLayer, Rules, NetworkRules, Egress, Sandbox, Agent, Audit, Policy,
    WritableRoot, SandboxPlan, RunOptions,
]  # fmt: skip


class Point(Record):
    __slots__ = ("label", "x", "y")
    __match_args__ = ("x", "y", "label")

    x: int
    y: int
    label: str

    def __init__(self, x: int, y: int, label: str = "") -> None:
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "label", label)


@dataclasses.dataclass(frozen=True, slots=True)
class Point2:
    x: int
    y: int
    label: str = ""


class Box(Record, frozen=False):
    __slots__ = ("items", "name")
    __match_args__ = ("name", "items")
    _unshown = frozenset({"items"})

    name: str
    items: list[int]

    def __init__(self, name: str, items: list[int]) -> None:
        self.name = name
        self.items = items


def test_a_frozen_record_is_what_a_frozen_dataclass_is() -> None:
    p, q = Point(1, 2, "a"), Point2(1, 2, "a")
    assert repr(p).replace("Point(", "") == repr(q).replace("Point2(", "")
    assert p == Point(1, 2, "a") and hash(p) == hash(Point(1, 2, "a"))
    assert p != Point(1, 3, "a") and p != q and p != (1, 2, "a")
    assert p.replace(y=5) == Point(1, 5, "a")
    assert dataclasses.replace(q, y=5) == Point2(1, 5, "a")
    with pytest.raises(TypeError, match="no field 'z'"):
        p.replace(z=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del p.x
    with pytest.raises(AttributeError):
        p.other = 1  # type: ignore[attr-defined]
    match p:
        case Point(1, y, label):
            assert (y, label) == (2, "a")
        case _:
            pytest.fail("positional match")


def test_a_mutable_record_is_what_a_plain_dataclass_is() -> None:
    b = Box("b", [1])
    b.items.append(2)
    b.name = "c"
    assert b == Box("c", [1, 2]) and b != Box("c", [1])
    with pytest.raises(TypeError):
        hash(b)
    assert repr(b) == "Box(name='c')"  # _unshown: as field(repr=False)


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_each_record_takes_its_fields_in_order(cls: type[Record]) -> None:
    """Positional construction is the dataclass's: the fields in declaration order."""
    names = list(cls.__match_args__)
    if cls is _Group:  # built by keyword only
        return
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    assert params == names
    slots = {s for c in cls.__mro__ for s in getattr(c, "__slots__", ())}
    assert set(names) - {"regex"} <= slots
    assert all("__slots__" in vars(c) for c in cls.__mro__ if c is not object)  # no __dict__


def test_a_policy_pattern_compiles_its_regex_on_first_use() -> None:
    p = parse_pattern("src/**/*.py")
    assert p is not None
    assert p._regex is None and p.regex_source is not None  # parsed, not compiled
    same = parse_pattern("src/**/*.py")
    assert p == same and hash(p) == hash(same)
    compiled = Pattern(p.text, p.negated, p.dir_only, p.root, p.anchored, p.body,
                       re.compile(p.regex_source, re.DOTALL), p.source, p.problem)  # fmt: skip
    assert compiled == p and hash(compiled) == hash(p)  # compiled or not: the same pattern
    assert p.matches_level("src/a/b.py", False) and not p.matches_level("src/a/b.txt", False)
    assert p._regex is not None and p.regex is p._regex and p == compiled
    assert p.regex.pattern == p.regex_source
    other = parse_pattern("src/**/*.pyc")
    assert other is not None and other != p
    never = parse_pattern("a/[")  # a glob git never matches
    assert never is not None and never.regex is None and never.regex_source is None
    assert not never.matches_level("a/[", False)
    net = parse_network_pattern("Example.COM:443", Source("p", 1, "k", 0))
    assert net is not None and net.text == "Example.COM:443" and net._regex is None
    assert net.matches_level("example.com/443", False)


def test_a_loaded_policy_compiles_no_glob(tmp_path: Path) -> None:
    """Loading a policy (guard run's start) parses its patterns and compiles none."""
    from guard.decide import Guard

    g = Guard.load(policy="builtin:default", worktree=tmp_path)
    assert g.protected_patterns and all(p._regex is None for p in g.protected_patterns
                                        if p.body)  # fmt: skip
    d = g.decide("plan", [Effect.write(str(tmp_path / "src/a.py"))])
    assert d.action is Action.DENY


def test_host_parts_are_checked_as_before() -> None:
    with pytest.raises(ValueError, match="unknown parts"):
        Host("x", "X", "1", parts=frozenset({"nope"}))
    h = Host("x", "X", "1")
    assert h.replace(title="Y").title == "Y" and h.replace(title="Y") != h
