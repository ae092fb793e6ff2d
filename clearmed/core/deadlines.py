"""Each attempt's deadline: a call to an outside service bounded in total, kept by one watchdog thread.

`bounded_call` gives one attempt a total deadline (an HTTP client's timeout only bounds the wait for the next byte, so
a server trickling a byte a second never trips it), counted from the attempt's first socket, so the client's own setup
before it is not spent from the server's time. A second Ctrl-C (`clearmed.core.retries.cut_retries`) ends every
attempt in flight at once, as it ends the waits between retries: the attempt raises `RetriesCut`.

An attempt runs in its caller's own thread, never in a thread of its own: a thread given up on at its deadline would
keep its socket until the server let go (a trickling server: minutes), and every thread that touches DSPy's disk cache
keeps a SQLite connection per cache shard. Instead one watchdog thread for the whole process shuts the attempt's
sockets down at its deadline (or at the cut), so the blocked read returns at once, the client closes the connection
and raises, and `bounded_call` raises `DeadlineExceeded` (or `RetriesCut`) in its place. The attempt's sockets are
those it connects (Python's ``socket.connect`` audit event) and the pooled connections its client marks with
`guard_socket` as it reuses them (`backbones.client`, `retrieval.tavily`).

Retries themselves (the backoff policy, the per-call counts, the cut) are `clearmed.core.retries`; a client wraps each
attempt of its retry chain in `bounded_call`.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from contextvars import ContextVar
from typing import Final, TypeVar

from clearmed.core.retries import RetriesCut, retries_cut

__all__ = ["DeadlineExceeded", "bounded_call", "guard_socket"]

_T = TypeVar("_T")

# How often the watchdog looks at the cut while attempts run (a signal handler must not take its lock).
_POLL_S: Final = 0.1


class DeadlineExceeded(TimeoutError):
    """One attempt had no complete answer within its deadline."""


class _Attempt:
    """One bounded attempt: its deadline, when it must end, the sockets it reads from, and whether the watchdog ended
    it."""

    __slots__ = ("deadline_s", "ended", "ends", "sockets")

    def __init__(self, deadline_s: float | None) -> None:
        self.deadline_s = deadline_s
        self.ends = None if deadline_s is None else time.monotonic() + deadline_s
        self.sockets: list[socket.socket] = []
        self.ended = False


def _shut(sock: socket.socket) -> None:
    # `socket.socket.shutdown`, not the object's own: an SSL socket's would drop its TLS state under the reading
    # thread. Shut down, not closed: the client closes it once its read fails, and a descriptor closed under a
    # blocked read could be reused by another connection before the read returns.
    with suppress(OSError, ValueError):  # already closed or never connected: nothing is reading from it
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watchdog:
    """The one thread that ends attempts whose deadline passed, or all of them when the retries are cut."""

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._attempts: set[_Attempt] = set()
        self._thread: threading.Thread | None = None

    def start(self, attempt: _Attempt) -> None:
        with self._wake:
            self._attempts.add(attempt)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True, name="clearmed-deadlines")
                self._thread.start()
            self._wake.notify()

    def stop(self, attempt: _Attempt) -> None:
        with self._wake:
            self._attempts.discard(attempt)

    def guard(self, attempt: _Attempt, sock: socket.socket) -> None:
        with self._wake:
            running = attempt in self._attempts
            if running and not attempt.sockets and attempt.deadline_s is not None and not retries_cut():
                # The attempt's first socket: its deadline runs from here. What the client did before it (DSPy choosing
                # its engine, LiteLLM importing itself on its first call: seconds of CPU) is not the server's time; a
                # 2 s timeout was spent on it, and a refused connection surfaced as a timeout (issue 58).
                attempt.ends = time.monotonic() + attempt.deadline_s
                attempt.ended = False  # nothing was shut: the watchdog had no socket to end
                self._wake.notify()
            if attempt.ended:
                _shut(sock)
            elif running:
                attempt.sockets.append(sock)

    def _run(self) -> None:
        with self._wake:
            while True:
                now = time.monotonic()
                cut = retries_cut()
                waits = []
                for attempt in self._attempts:
                    if attempt.ended:
                        continue
                    if cut or (attempt.ends is not None and now >= attempt.ends):
                        attempt.ended = True
                        for sock in attempt.sockets:
                            _shut(sock)
                    elif attempt.ends is not None:
                        waits.append(attempt.ends - now)
                self._wake.wait(min([_POLL_S, *waits]) if self._attempts else None)


_WATCHDOG = _Watchdog()
_ATTEMPT: ContextVar[_Attempt | None] = ContextVar("clearmed_bounded_attempt", default=None)
_HOOKED = False
_HOOK_LOCK = threading.Lock()


def guard_socket(sock: socket.socket) -> None:
    """Mark ``sock`` as read by the bounded attempt running in this context (none: nothing to do), so its deadline
    can end the read. For clients that reuse pooled connections; a socket connected inside the attempt is marked
    already."""
    attempt = _ATTEMPT.get()
    if attempt is not None:
        _WATCHDOG.guard(attempt, sock)


def _on_audit(event: str, args: tuple[object, ...]) -> None:
    if event == "socket.connect" and isinstance(args[0], socket.socket):
        guard_socket(args[0])


def _hook_connects() -> None:
    """Mark every socket connected inside a bounded attempt (installed once: audit hooks cannot be removed; outside an
    attempt the hook only compares a string)."""
    global _HOOKED
    with _HOOK_LOCK:
        if not _HOOKED:
            sys.addaudithook(_on_audit)
            _HOOKED = True


def bounded_call(call: Callable[[], _T], deadline_s: float | None) -> _T:
    """``call()`` with a total deadline: `DeadlineExceeded` when it has not returned within ``deadline_s`` seconds (no
    bound when None) of its first socket (connected or reused; of the call's start when it used none), `RetriesCut`
    when the retries are cut meanwhile.

    The call runs in this thread. At the deadline or the cut the watchdog shuts the attempt's sockets down; the client's
    blocked read ends at once, and whatever the call then raises or returns (a client may take the shut connection for
    the end of a body) is replaced by `DeadlineExceeded` (or `RetriesCut`). A call blocked on nothing it claimed is not
    interrupted: past its deadline it ends the same way, when it ends."""
    if retries_cut():
        raise RetriesCut("retries cut short")
    _hook_connects()
    attempt = _Attempt(deadline_s)
    token = _ATTEMPT.set(attempt)
    _WATCHDOG.start(attempt)
    try:
        value = call()
    except Exception as exc:
        _raise_if_ended(attempt, deadline_s, exc)
        raise
    finally:
        _WATCHDOG.stop(attempt)
        _ATTEMPT.reset(token)
    _raise_if_ended(attempt, deadline_s, None)
    return value


def _raise_if_ended(attempt: _Attempt, deadline_s: float | None, cause: BaseException | None) -> None:
    """`RetriesCut` for an attempt the cut ended (or that failed once cut), `DeadlineExceeded` past its deadline;
    ``cause`` is the call's own failure, None when it returned."""
    if retries_cut() and (cause is not None or attempt.ended):
        raise RetriesCut("retries cut short") from cause
    if deadline_s is not None and attempt.ends is not None and time.monotonic() >= attempt.ends:
        raise DeadlineExceeded(f"no complete reply within {deadline_s:g} s") from cause
