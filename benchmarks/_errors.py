"""Loader errors. Every message names the file (or hub dataset) and the line or row it is about."""

from __future__ import annotations


class BenchmarkError(Exception):
    """Base class: something about a benchmark could not be loaded."""


class UnknownBenchmarkError(BenchmarkError, KeyError):
    """The name is not in the registry."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class BenchmarkSourceError(BenchmarkError):
    """The source as a whole is unusable: missing file, unreachable hub, unsupported format, bad split."""


class BenchmarkDataError(BenchmarkError, ValueError):
    """One row is malformed (raised with `on_error="raise"`); `location` is `file:line` or `hub row`."""

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"{location}: {reason}")
        self.location = location
        self.reason = reason


class RowError(ValueError):
    """Raised by row parsers for a malformed row; the registry adds the location and applies `on_error`."""


class UnusableRow(ValueError):
    """A well-formed upstream row that cannot be a `Question` (e.g. two options with the same text).

    These are known data issues of the upstream benchmark, not broken input, so they are always skipped and
    counted, whatever `on_error` says: failing the whole MedMCQA load on them would help nobody.
    """


class Excluded(Exception):
    """The row is outside the benchmark by definition (other category, not an MCQ, ...); counted by reason."""
