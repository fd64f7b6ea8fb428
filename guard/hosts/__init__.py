"""The host agents guard knows: one package per host, listed in one registry.

Each host is a package ``guard/hosts/<module>/`` implementing the
:class:`~guard.hosts.interface.Host` interface: its ``__init__`` holds the host's
record (``HOST``: name, pinned version, npm packages, protected settings, dialect,
planning gestures, checklist tool) and its other modules are its parts (the hook
adapter, the tool table of its dialect, the importer, the transcript reader, the
planning gestures, the install specifics), each imported only when asked for
(:meth:`Host.part`). Every host list in guard derives from :data:`HOSTS`, and no module
outside ``guard/hosts/`` names a particular host. Adding a host is one new package and
one line in :data:`PACKAGES` (docs/hosts.md, "Adding a host").

A record imports nothing of guard but :mod:`guard.hosts.interface`: the hook's start-up
path reads every record (each host's protected settings are in every decision) without
paying for any host's parts but the one it serves.

>>> [h.name for h in HOSTS]
['claude-code', 'codex', 'opencode', 'gemini', 'cursor', 'aider']
>>> by_name("gemini").version
'0.61.0'
"""

from __future__ import annotations

import importlib

from guard.hosts.interface import Checklist, Host, Planning

__all__ = [
    "DIALECTS", "HOOKED", "HOSTS", "IMPORTABLE", "NAMES", "PACKAGES", "PLANNED", "REPLAYABLE",
    "Checklist", "Host", "Planning", "by_dialect", "by_name", "get",
]

#: The registry: every host's package under guard/hosts/, in the order guard lists them.
PACKAGES: tuple[str, ...] = (
    "claude_code",
    "codex",
    "opencode",
    "gemini",
    "cursor",
    "aider",
)


def _record(package: str) -> Host:
    host = importlib.import_module(f"{__name__}.{package}").HOST
    if not isinstance(host, Host) or host.module != package:
        raise TypeError(f"guard/hosts/{package}/__init__.py: HOST must be the Host record"
                        f" named {package.replace('_', '-')!r}")
    return host


#: Every host, in the order guard lists them.
HOSTS: tuple[Host, ...] = tuple(_record(p) for p in PACKAGES)
#: Every host name, in that order.
NAMES: tuple[str, ...] = tuple(h.name for h in HOSTS)
#: The hosts with a hook adapter (``guard install``, the hook's argument).
HOOKED: tuple[str, ...] = tuple(h.name for h in HOSTS if h.hooked)
#: The tool-call dialects of the hosts (several hosts may share one), in that order.
DIALECTS: tuple[str, ...] = tuple(dict.fromkeys(h.dialect for h in HOSTS if h.dialect))
#: The hosts guard's planning hook serves.
PLANNED: tuple[str, ...] = tuple(h.name for h in HOSTS if h.planning)
#: The hosts ``guard import`` reads settings of.
IMPORTABLE: tuple[str, ...] = tuple(h.name for h in HOSTS if h.importable)
#: The hosts ``guard replay`` reads transcripts of.
REPLAYABLE: tuple[str, ...] = tuple(h.name for h in HOSTS if h.replayable)

_BY_NAME = {h.name: h for h in HOSTS}
_BY_DIALECT = {h.dialect: h for h in HOSTS if h.owns_dialect}
if len(_BY_NAME) != len(HOSTS) or len(_BY_DIALECT) != sum(h.owns_dialect for h in HOSTS):
    raise ValueError("two hosts in guard.hosts.PACKAGES share a name or an own dialect")


def by_name(name: str) -> Host:
    """The host called ``name``; KeyError for a name guard does not know."""
    return _BY_NAME[name]


def get(name: str) -> Host | None:
    """The host called ``name``, or None."""
    return _BY_NAME.get(name)


def by_dialect(dialect: str) -> Host | None:
    """The host whose own dialect (its tool table) is ``dialect``, or None."""
    return _BY_DIALECT.get(dialect)
