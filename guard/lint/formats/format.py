"""The interface every output format implements."""

from __future__ import annotations

from abc import ABC, abstractmethod

from guard.lint.findings import Report


class Formatter(ABC):
    """Renders a lint report as text (one module per format)."""

    name: str = ""

    @abstractmethod
    def format(self, report: Report) -> str:
        """The whole output, ending with a newline."""
