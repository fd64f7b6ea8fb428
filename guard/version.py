"""guard's version: one string, nothing else.

The package (:data:`guard.__version__`), the audit records and the SARIF report read it
from here; the hook client reads this file as text, without importing guard.
"""

__version__ = "0.1.0"
