"""``guard import``: host agents' permission settings -> guard policies, with notes.

What every importer shares is here (:mod:`guard.importers.common`); each host's own
importer is its ``importer`` part (guard/hosts/<host>/importer.py,
:meth:`guard.hosts.Host.importer`), which imports this package: so this module
imports none of them.
"""

from guard.importers.common import Draft, read_json, validate, write_atomically

__all__ = ["Draft", "read_json", "validate", "write_atomically"]
