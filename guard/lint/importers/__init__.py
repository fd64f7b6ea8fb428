"""``guard import``: host agents' permission settings -> guard policies, with notes."""

from guard.lint.importers import claude_code, opencode
from guard.lint.importers.common import Draft, read_json, validate, write_atomically

IMPORTERS = {"claude-code": claude_code.convert, "opencode": opencode.convert}

__all__ = ["IMPORTERS", "Draft", "read_json", "validate", "write_atomically"]
