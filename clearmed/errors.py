"""Errors the command line reports as one clear line (exit code 2) instead of a traceback."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user: a malformed question, an unknown demo id, conflicting flags."""
