from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from clearmed.retrieval.base import EvidenceError, WebSearch
from clearmed.retrieval.cache import CachedWebSearch, DamagedCacheEntryWarning
from clearmed.retrieval.memory import InMemoryWebSearch, web_passage

PAGES = [
    web_passage("p1", "https://www.cdc.gov/measles", "Measles", "Measles rash and fever", "2024-01-02"),
    web_passage("p2", "https://www.who.int/measles", "Measles WHO", "Measles vaccine schedule"),
    web_passage("p3", "https://example.com/flu", "Flu", "Influenza season"),
]


class Counting(InMemoryWebSearch):
    def cache_params(self) -> dict[str, object]:
        return {"depth": "advanced"}


def test_record_then_replay_gives_identical_passages(tmp_path: Path) -> None:
    inner = Counting(PAGES, name="mem")
    recorder = CachedWebSearch(inner, tmp_path / "c.sqlite", "record")
    assert isinstance(recorder, WebSearch)
    assert recorder.name == "mem"
    first = recorder.search("measles rash", 8)
    again = recorder.search("measles rash", 8)
    assert first == again
    assert inner.queries == ["measles rash"]  # second call was a hit
    assert (recorder.hits, recorder.misses) == (1, 1)
    recorder.close()

    offline = Counting(PAGES, name="mem", fail_with=EvidenceError("must not be called", kind="other"))
    replay = CachedWebSearch(offline, tmp_path / "c.sqlite", "replay")
    assert replay.search("measles rash", 8) == first
    assert offline.queries == []
    assert str(first[0].provenance.published) == "2024-01-02"


def test_replay_miss_is_an_explicit_error(tmp_path: Path) -> None:
    CachedWebSearch(Counting(PAGES, name="mem"), tmp_path / "c.sqlite", "record").search("measles", 8)
    replay = CachedWebSearch(Counting(PAGES, name="mem"), tmp_path / "c.sqlite", "replay")
    with pytest.raises(EvidenceError, match="no results for query 'influenza'") as info:
        replay.search("influenza", 8)
    assert info.value.kind == "cache_miss"
    # A different max_results or backend parameter is a different search.
    with pytest.raises(EvidenceError, match="max_results 3"):
        replay.search("measles", 3)
    other = CachedWebSearch(Counting(PAGES, name="mem"), tmp_path / "c.sqlite", "replay", params={"depth": "basic"})
    with pytest.raises(EvidenceError):
        other.search("measles", 8)


def test_replay_without_a_cache_file(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match="does not exist") as info:
        CachedWebSearch(Counting(PAGES), tmp_path / "none.sqlite", "replay")
    assert info.value.kind == "cache"


def test_off_passes_through_and_creates_nothing(tmp_path: Path) -> None:
    inner = Counting(PAGES)
    cache = CachedWebSearch(inner, tmp_path / "c.sqlite", "off")
    cache.search("measles", 8)
    cache.search("measles", 8)
    assert inner.queries == ["measles", "measles"]
    assert not (tmp_path / "c.sqlite").exists()


def test_inner_failures_are_not_cached(tmp_path: Path) -> None:
    inner = Counting(PAGES, fail_with=EvidenceError("down", kind="server"))
    cache = CachedWebSearch(inner, tmp_path / "c.sqlite", "record")
    with pytest.raises(EvidenceError, match="down"):
        cache.search("measles", 8)
    inner.fail_with = None
    assert cache.search("measles", 8)
    assert len(cache) == 1


def test_empty_results_are_cached(tmp_path: Path) -> None:
    inner = Counting(PAGES)
    cache = CachedWebSearch(inner, tmp_path / "c.sqlite", "record")
    assert cache.search("nothing matches", 8) == []
    assert cache.search("nothing matches", 8) == []
    assert inner.queries == ["nothing matches"]


def test_corrupt_database(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not a sqlite file" * 100)
    with pytest.raises(EvidenceError, match="corrupt") as info:
        CachedWebSearch(Counting(PAGES), path, "record")
    assert info.value.kind == "cache"


def test_locked_database(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = CachedWebSearch(Counting(PAGES), path, "record", busy_timeout=0.1)
    blocker = sqlite3.connect(path)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(EvidenceError, match="locked") as info:
            cache.search("measles", 8)
        assert info.value.kind == "busy"  # transient: the question is degraded, not answered without search
    finally:
        blocker.rollback()
        blocker.close()
    assert cache.search("measles", 8)


@pytest.mark.parametrize("damage", ['[{"id": 1}]', "{broken"])
def test_an_unreadable_stored_row_is_dropped_refetched_and_warned_about(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "c.sqlite"
    inner = Counting(PAGES)
    cache = CachedWebSearch(inner, path, "record")
    first = cache.search("measles", 8)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE searches SET passages = ?", (damage,))
    with pytest.warns(DamagedCacheEntryWarning, match="unreadable.*dropped and searched again"):
        again = cache.search("measles", 8)
    assert again == first
    assert cache.search("other measles", 8) is not None  # later searches are unaffected
    assert cache.search("measles", 8) == first  # stored anew: served from the cache, no warning
    assert cache.misses == 3


def test_an_unreadable_row_in_replay_mode_is_a_recorded_miss(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    CachedWebSearch(Counting(PAGES), path, "record").search("measles", 8)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE searches SET passages = '{broken'")
    with pytest.raises(EvidenceError, match="unreadable") as info:
        CachedWebSearch(Counting(PAGES), path, "replay").search("measles", 8)
    assert info.value.kind == "cache_miss"


def test_connections_are_pooled_not_kept_per_thread(tmp_path: Path) -> None:
    cache = CachedWebSearch(Counting(PAGES), tmp_path / "c.sqlite", "record")
    for n in range(40):  # forty short-lived threads, one search each: one connection serves them all
        thread = threading.Thread(target=cache.search, args=(f"measles {n}", 8))
        thread.start()
        thread.join()
    assert cache.open_connections == 1
    cache.close()


def test_threads_share_the_cache(tmp_path: Path) -> None:
    cache = CachedWebSearch(Counting(PAGES), tmp_path / "c.sqlite", "record")
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(15):
                cache.search(f"measles {i % 5} {n % 2}", 8)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(cache) == 10
    assert cache.hits + cache.misses == 90
    cache.close()


def test_bad_mode(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="record, replay or off"):
        CachedWebSearch(Counting(PAGES), tmp_path / "c.sqlite", "write")  # type: ignore[arg-type]
