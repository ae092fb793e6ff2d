"""`deadlines.bounded_call`: a total deadline per attempt, in the caller's own thread, that cuts the attempt's sockets.

The attempt's sockets are those it connects and those its client marks with `guard_socket` (a pooled keep-alive
connection); a socket the attempt never claimed is never cut, whoever else reads from it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from clearmed.core.deadlines import DeadlineExceeded, bounded_call, guard_socket
from clearmed.core.retries import RetriesCut, cut_retries, reset_cut


@pytest.fixture
def trickler() -> Iterator[tuple[str, int]]:
    """A TCP server on 127.0.0.1 that sends a byte every 0.1 s to each connection, for 5 s."""
    server = socket.create_server(("127.0.0.1", 0))
    closing = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            for _ in range(50):
                if closing.wait(0.1):
                    return
                try:
                    conn.sendall(b"x")
                except OSError:
                    return

    def accept() -> None:
        while not closing.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True, name="trickler-conn").start()

    threading.Thread(target=accept, daemon=True, name="trickler").start()
    yield server.getsockname()[:2]
    closing.set()
    server.close()


def _ours() -> int:
    """Threads of this test's client side (the server's own come and go with its connections)."""
    return sum(1 for thread in threading.enumerate() if not thread.name.startswith("trickler"))


def _read_all(sock: socket.socket) -> bytes:
    """What a client reading a reply does: read until the server is done (a per-read timeout of 1 s never fires)."""
    sock.settimeout(1.0)
    data = b""
    while chunk := sock.recv(1):
        data += chunk
    return data


@pytest.fixture(autouse=True)
def _uncut() -> Iterator[None]:
    reset_cut()
    yield
    reset_cut()


def test_a_trickled_read_ends_at_the_deadline_in_the_callers_thread(trickler: tuple[str, int]) -> None:
    ran_in: list[int] = []

    def call() -> bytes:
        ran_in.append(threading.get_ident())
        with socket.create_connection(trickler) as sock:  # connected inside the attempt: cut at its deadline
            return _read_all(sock)

    bounded_call(lambda: None, 1.0)  # the watchdog thread exists from here on
    threads = _ours()
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"no complete reply within 0\.4 s"):
        bounded_call(call, 0.4)
    assert 0.35 < time.monotonic() - started < 0.9
    assert ran_in == [threading.get_ident()]
    assert _ours() == threads


def test_a_reused_connection_is_cut_only_when_the_client_marks_it(trickler: tuple[str, int]) -> None:
    with socket.create_connection(trickler) as pooled:  # opened before the attempt, as a keep-alive pool does

        def reuse() -> bytes:
            guard_socket(pooled)  # what the client's pool does as it hands the connection out
            return _read_all(pooled)

        started = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            bounded_call(reuse, 0.3)
        assert time.monotonic() - started < 0.8
    with socket.create_connection(trickler) as unmarked:
        unmarked.settimeout(1.0)
        # Not the attempt's: never cut (it may be another's); the attempt ends late, as a timeout all the same.
        with pytest.raises(DeadlineExceeded):
            bounded_call(lambda: unmarked.recv(1) + unmarked.recv(1) + unmarked.recv(1), 0.1)
        assert unmarked.recv(1) == b"x"


def test_the_cut_ends_an_attempt_at_once(trickler: tuple[str, int]) -> None:
    def call() -> bytes:
        with socket.create_connection(trickler) as sock:
            return _read_all(sock)

    threading.Timer(0.2, cut_retries).start()
    started = time.monotonic()
    with pytest.raises(RetriesCut):
        bounded_call(call, None)  # no deadline: only the cut ends it
    assert time.monotonic() - started < 0.8
    with pytest.raises(RetriesCut):
        bounded_call(lambda: None, 1.0)  # and no attempt starts until the cut is reset
