"""The LM cache's health: bounded connections, and a cache that cannot write says so, once.

DSPy's disk cache is a diskcache `FanoutCache` of 16 SQLite shards, and diskcache opens a connection to a shard (its
database and its write-ahead log: two descriptors) for every thread that touches it, kept for as long as that thread's
locals live. A run's question threads and pathway workers each touched every shard: hundreds of descriptors, and a
long run under ``ulimit -n 256`` died on them. `SerialDiskCache` runs every disk operation on one long-lived thread
instead, so the process holds one connection per shard whichever thread asks.

DSPy's disk cache also swallows a failed write (a full disk, a read-only folder) with a debug log line, so a run goes
on without caching and a resume pays again for what it believed was cached. `watch_lm_cache` turns that line into one
`LMCacheWarning` per process, and warns at the start when the cache folder cannot be written at all.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dspy

__all__ = ["LMCacheWarning", "SerialDiskCache", "watch_lm_cache"]

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


class SerialDiskCache:
    """A diskcache cache with every operation run on one worker thread of its own, so it holds one SQLite connection
    per shard (not one per shard for every thread that ever asked). What DSPy's `Cache` calls (``get``, ``set``,
    ``delete``, ``in``) goes through the worker; any other attribute is the wrapped cache's."""

    def __init__(self, disk: Any) -> None:
        self.disk = disk
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clearmed-lm-cache")
        disk.close()  # this thread's connections (opened when the cache was built): the worker opens its own

    def _run(self, name: str, *args: Any, **kwargs: Any) -> Any:
        # The method is looked up on the worker, at call time: a wrapped cache's method replaced later still counts.
        return self._worker.submit(lambda: getattr(self.disk, name)(*args, **kwargs)).result()

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self._run("get", *args, **kwargs)

    def set(self, *args: Any, **kwargs: Any) -> Any:
        return self._run("set", *args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        return self._run("delete", *args, **kwargs)

    def close(self) -> None:
        self._run("close")

    def __contains__(self, key: object) -> bool:
        return bool(self._run("__contains__", key))

    def __getitem__(self, key: object) -> Any:
        return self._run("__getitem__", key)

    def __setitem__(self, key: object, value: object) -> None:
        self._run("__setitem__", key, value)

    def __delitem__(self, key: object) -> None:
        self._run("__delitem__", key)

    def __getattr__(self, name: str) -> Any:
        if name == "disk":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.disk, name)


_INSTALLED: _FailedWrites | None = None


def watch_lm_cache() -> None:
    """Bound the disk cache's connections (`SerialDiskCache`), install the failed-write warning (once per process) and
    warn now if the cache folder is not writable."""
    global _INSTALLED
    cache = getattr(dspy, "cache", None)
    if cache is None or not getattr(cache, "enable_disk_cache", False):
        return
    if not isinstance(cache.disk_cache, SerialDiskCache):
        cache.disk_cache = SerialDiskCache(cache.disk_cache)
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
