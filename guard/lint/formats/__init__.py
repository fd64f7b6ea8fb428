"""Output formats for ``guard lint``: one module per format behind :class:`Formatter`."""

from guard.lint.formats.format import Formatter
from guard.lint.formats.github import GithubFormatter
from guard.lint.formats.json import JsonFormatter
from guard.lint.formats.pretty import PrettyFormatter
from guard.lint.formats.sarif import SarifFormatter

FORMATS: dict[str, type[Formatter]] = {
    "pretty": PrettyFormatter,
    "json": JsonFormatter,
    "sarif": SarifFormatter,
    "github": GithubFormatter,
}

__all__ = ["FORMATS", "Formatter", "GithubFormatter", "JsonFormatter", "PrettyFormatter",
           "SarifFormatter"]
