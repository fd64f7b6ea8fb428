"""``guard import``: host agents' permission settings -> guard policies, with notes."""

from collections.abc import Callable
from typing import Any

from guard import hosts
from guard.importers.common import Draft, read_json, validate, write_atomically

#: ``guard import HOST``: per host of :mod:`guard.hosts` with an importer, its converter.
IMPORTERS: dict[str, Callable[[Any, str], Draft]] = {
    h.name: h.importer() for h in hosts.HOSTS if h.importable
}

__all__ = ["IMPORTERS", "Draft", "read_json", "validate", "write_atomically"]
