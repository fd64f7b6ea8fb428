"""The planning runtime's vocabulary that every other planning module shares.

This module imports nothing from ``guard.planning``: it is the bottom of the
package's import graph (``_base`` <- ``_store``/``checklist`` <- ``events`` <-
``artifact`` <- ``session`` <- ``handshake`` <- ``tools``/``stream``/``render``
<- ``runtime`` <- ``host``).
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime


class Mode(enum.StrEnum):
    BUILD = "build"
    PLAN = "plan"


def utc_now() -> str:
    """Now, as an ISO 8601 UTC timestamp with microseconds and a ``Z``."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
