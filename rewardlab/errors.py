"""Errors that library code raises for a user's mistake, and the command line prints as one line (exit 2).

They live in the core layer so that any layer may raise them; only the CLI (``rewardlab.cli``) decides
how they are shown.
"""

from __future__ import annotations


class UserError(Exception):
    """A user-facing error: a bad argument, a missing file, a refused setting. Printed as one line, exit 2,
    no traceback."""
