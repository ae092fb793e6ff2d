"""The LM cache's health: a cache that cannot write says so, once, instead of silently caching nothing.

DSPy's disk cache swallows a failed write (a full disk, a read-only folder) with a debug log line, so a run goes on
without caching and a resume pays again for what it believed was cached. `watch_lm_cache` turns that line into one
`LMCacheWarning` per process, and warns at the start when the cache folder cannot be written at all.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import warnings

import dspy

__all__ = ["LMCacheWarning", "watch_lm_cache"]

_DSPY_CACHE_LOGGER = "dspy.clients.cache"
_FAILED_PUT = "Failed to put value in disk cache"


class LMCacheWarning(UserWarning):
    """The LM cache could not store a reply: later runs will call the model again for it."""


class _FailedWrites(logging.Filter):
    """Warns once on DSPy's failed-write line; passes on only what the logger let through before."""

    def __init__(self, threshold: int) -> None:
        super().__init__()
        self.threshold = threshold
        self.warned = False
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith(_FAILED_PUT):
            with self._lock:
                first, self.warned = not self.warned, True
            if first:
                error = record.args[-1] if isinstance(record.args, tuple) and record.args else "unknown error"
                warnings.warn(
                    f"the LM cache cannot write ({error}); replies are not being cached, so a resume pays for them "
                    "again: free disk space or set [run] lm_cache_dir",
                    LMCacheWarning,
                    stacklevel=2,
                )
        return record.levelno >= self.threshold


_INSTALLED: _FailedWrites | None = None


def watch_lm_cache() -> None:
    """Install the failed-write warning (once per process) and warn now if the cache folder is not writable."""
    global _INSTALLED
    cache = getattr(dspy, "cache", None)
    if cache is None or not getattr(cache, "enable_disk_cache", False):
        return
    if _INSTALLED is None:
        logger = logging.getLogger(_DSPY_CACHE_LOGGER)
        _INSTALLED = _FailedWrites(logger.getEffectiveLevel())
        logger.addFilter(_INSTALLED)
        logger.setLevel(logging.DEBUG)  # the failed write is logged at debug level; the filter drops the rest
    directory = getattr(getattr(cache, "disk_cache", None), "directory", None)
    if directory is None:
        return
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".clearmed-probe-"):
            pass
    except OSError as err:
        warnings.warn(
            f"the LM cache folder {directory} cannot be written ({err.strerror or err}); replies will not be "
            "cached: free disk space, fix its permissions or set [run] lm_cache_dir",
            LMCacheWarning,
            stacklevel=2,
        )
