"""The local pathway's hit cache: recorded once through the index, replayed with no index opened, refused when the
index it was recorded against is not the one configured, and a replay miss that stops the run instead of answering
without evidence."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from clearmed.config import answer_settings, parse_config
from clearmed.core.errors import FatalServiceError
from clearmed.programs.pathways.evidence_search import evidence_failure
from clearmed.retrieval import bm25_sparse
from clearmed.retrieval.base import EvidenceError, Retriever
from clearmed.retrieval.cache import DamagedCacheEntryWarning
from clearmed.retrieval.config import CorpusConfig
from clearmed.retrieval.corpus import FieldMapping
from clearmed.retrieval.factory import build_retriever
from clearmed.retrieval.hit_cache import CachedRetriever
from clearmed.retrieval.index_identity import corpus_settings, index_version
from clearmed.retrieval.memory import InMemoryRetriever
from clearmed.signatures.records import Passage

from .conftest import TOY_DOCS, write_jsonl

QUERIES = ["macrocytic anemia", "hypothyroidism TSH", "asthma inhaled corticosteroids", "IL-6 cytokine"]


def toy_corpus(tmp_path: Path, *, mode: str = "record", docs: list[dict[str, str]] = TOY_DOCS) -> CorpusConfig:
    source = write_jsonl(tmp_path / "toy.jsonl", list(docs))
    return CorpusConfig(
        backend="bm25s",
        path=source,
        fields=FieldMapping(),
        index_dir=tmp_path / "index",
        hit_cache=tmp_path / "hits.sqlite",
        hit_cache_mode=mode,  # type: ignore[arg-type]
    )


def no_index_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the index was opened")

    monkeypatch.setattr(bm25_sparse.BM25sRetriever, "load", refuse)
    monkeypatch.setattr(bm25_sparse.BM25sRetriever, "build", refuse)


def recorded(tmp_path: Path, queries: list[str] = QUERIES, k: int = 3) -> dict[str, list[Passage]]:
    recorder = build_retriever(toy_corpus(tmp_path))
    hits = {query: recorder.retrieve(query, k) for query in queries}
    assert isinstance(recorder, CachedRetriever)
    recorder.close()
    return hits


# --------------------------------------------------------------------------------------------- record, replay


def test_replay_gives_the_recorded_hits_and_provenance_without_opening_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = build_retriever(toy_corpus(tmp_path).model_copy(update={"hit_cache": None}))
    hits = recorded(tmp_path)
    assert hits == {query: live.retrieve(query, 3) for query in QUERIES}  # recording changes nothing
    assert hits["macrocytic anemia"][0].provenance.query == "macrocytic anemia"

    no_index_opens(monkeypatch)
    replay = build_retriever(toy_corpus(tmp_path, mode="replay"))
    assert isinstance(replay, Retriever)
    assert isinstance(replay, CachedRetriever)
    assert replay.inner is None
    assert replay.name == live.name == "toy"
    for query in QUERIES:
        again = replay.retrieve(query, 3)
        assert again == hits[query]
        assert [p.provenance for p in again] == [p.provenance for p in hits[query]]  # rank, score, doc id, corpus
    assert (replay.hits, replay.misses) == (len(QUERIES), 0)
    assert len(replay) == len(QUERIES)


def test_a_replay_miss_stops_the_run_in_one_line(tmp_path: Path) -> None:
    recorded(tmp_path, QUERIES[:1])
    replay = build_retriever(toy_corpus(tmp_path, mode="replay"))
    with pytest.raises(EvidenceError) as caught:
        replay.retrieve("folate deficiency", 3)
    message = str(caught.value)
    assert "has no hits for k=3 and the query 'folate deficiency'" in message
    assert "clearmed index warm" in message
    assert "\n" not in message
    with pytest.raises(EvidenceError, match="k=5"):  # another k is another search
        replay.retrieve(QUERIES[0], 5)
    # Not an empty hit list the pathway would answer around: the run stops, and resumes once the cache is warmed.
    with pytest.raises(FatalServiceError, match="has no hits"):
        evidence_failure("local", "local_retrieval", caught.value)


def test_replay_without_the_file_or_of_another_corpus_set_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match="does not exist; warm it") as caught:
        build_retriever(toy_corpus(tmp_path, mode="replay"))
    assert caught.value.kind == "cache"
    recorded(tmp_path, QUERIES[:1])
    renamed = toy_corpus(tmp_path, mode="replay").model_copy(update={"name": "other"})
    with pytest.raises(EvidenceError) as caught:
        build_retriever(renamed)
    message = str(caught.value)
    assert '"name": "other"' in message
    assert '; it holds {"backend": "bm25s", "corpus": "toy", "name": null' in message
    assert "\n" not in message


def test_an_index_rebuilt_since_the_recording_is_refused_naming_both_versions(tmp_path: Path) -> None:
    recorded(tmp_path)
    before = index_version(toy_corpus(tmp_path))
    grown = [*TOY_DOCS, {"id": "d9", "title": "Gout", "text": "Urate crystals cause gout; allopurinol lowers urate."}]
    build_retriever(toy_corpus(tmp_path, docs=grown).model_copy(update={"hit_cache": None, "rebuild": True}))
    after = index_version(toy_corpus(tmp_path))
    assert before is not None
    assert after is not None
    assert before != after
    for mode in ("replay", "record"):
        with pytest.raises(EvidenceError) as caught:
            build_retriever(toy_corpus(tmp_path, mode=mode, docs=grown))
        message = str(caught.value)
        assert f"recorded against index version {before}, but the index is version {after} now" in message
        assert "\n" not in message
        assert caught.value.kind == "cache"


def test_a_worker_without_the_index_replays_as_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hits = recorded(tmp_path)
    for path in sorted((tmp_path / "index").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    no_index_opens(monkeypatch)
    replay = build_retriever(toy_corpus(tmp_path, mode="replay"))
    assert index_version(toy_corpus(tmp_path)) is None
    assert replay.retrieve(QUERIES[0], 3) == hits[QUERIES[0]]


def test_the_closed_cache_is_one_file_and_replays_from_a_read_only_folder(tmp_path: Path) -> None:
    hits = recorded(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("hits.sqlite*")) == ["hits.sqlite"]  # no -wal, -shm to copy along
    worker = tmp_path / "worker"
    worker.mkdir()
    (worker / "hits.sqlite").write_bytes((tmp_path / "hits.sqlite").read_bytes())
    worker.chmod(0o555)
    try:
        cfg = toy_corpus(tmp_path, mode="replay").model_copy(update={"hit_cache": worker / "hits.sqlite"})
        replay = build_retriever(cfg)
        assert isinstance(replay, CachedRetriever)
        assert replay.retrieve(QUERIES[1], 3) == hits[QUERIES[1]]
        assert [p.name for p in worker.iterdir()] == ["hits.sqlite"]  # read only: nothing written beside it
        replay.close()
    finally:
        worker.chmod(0o755)


def test_a_file_left_in_wal_mode_where_sqlite_cannot_write_is_read_as_immutable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hits = recorded(tmp_path)
    with contextlib.closing(sqlite3.connect(tmp_path / "hits.sqlite")) as conn:  # as a record run leaves it
        assert conn.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    opened: list[str] = []
    connect = sqlite3.connect

    def read_only_folder(target: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(str(target))
        if "mode=ro" in str(target):  # what SQLite says of a WAL file whose -shm it may not create
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return connect(target, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", read_only_folder)
    replay = build_retriever(toy_corpus(tmp_path, mode="replay"))
    assert replay.retrieve(QUERIES[2], 3) == hits[QUERIES[2]]
    assert [target.rpartition("?")[2] for target in opened] == ["mode=ro", "immutable=1"]


# --------------------------------------------------------------------------------------------- failures


class Failing(InMemoryRetriever):
    """Refuses one query the way Lucene refuses a query of too many clauses, or fails as a busy service does."""

    def __init__(self, passages: list[Passage], error: EvidenceError) -> None:
        super().__init__(passages, name="toy")
        self.error = error
        self.calls = 0

    def retrieve(self, query: str, k: int) -> list[Passage]:
        self.calls += 1
        if query == "refused":
            raise self.error
        return super().retrieve(query, k)


SETTINGS = {"backend": "test", "corpus": "toy"}


def test_a_deterministic_failure_is_recorded_and_replayed_as_it_happened(
    tmp_path: Path, toy_passages: list[Passage]
) -> None:
    inner = Failing(toy_passages, EvidenceError("corpus 'toy': too many clauses", kind="bad_request", backend="x"))
    recorder = CachedRetriever(inner, tmp_path / "h.sqlite", "record", settings=SETTINGS, version="v1")
    for _ in range(2):
        with pytest.raises(EvidenceError, match="too many clauses") as caught:
            recorder.retrieve("refused", 4)
        assert (caught.value.kind, caught.value.backend) == ("bad_request", "x")
    assert inner.calls == 1
    recorder.close()
    replay = CachedRetriever(None, tmp_path / "h.sqlite", "replay", settings=SETTINGS, version="v1")
    with pytest.raises(EvidenceError, match="too many clauses") as caught:
        replay.retrieve("refused", 4)
    assert caught.value.kind == "bad_request"  # the pathway records it, as it did live


@pytest.mark.parametrize("kind", ["timeout", "busy", "index"])
def test_a_failure_that_may_pass_or_never_will_is_not_stored(
    kind: str, tmp_path: Path, toy_passages: list[Passage]
) -> None:
    inner = Failing(toy_passages, EvidenceError("flaky", kind=kind))  # type: ignore[arg-type]
    recorder = CachedRetriever(inner, tmp_path / "h.sqlite", "record", settings=SETTINGS, version="v1")
    for _ in range(2):
        with pytest.raises(EvidenceError, match="flaky"):
            recorder.retrieve("refused", 4)
    assert inner.calls == 2
    assert len(recorder) == 0


def test_a_damaged_row_is_searched_again_when_recording_and_stops_a_replay(
    tmp_path: Path, toy_passages: list[Passage]
) -> None:
    path = tmp_path / "h.sqlite"
    inner = InMemoryRetriever(toy_passages, name="toy")
    recorder = CachedRetriever(inner, path, "record", settings=SETTINGS, version="v1")
    first = recorder.retrieve("anemia", 3)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE hits SET result = '{broken'")
    with pytest.warns(DamagedCacheEntryWarning, match="dropped and searched again"):
        assert recorder.retrieve("anemia", 3) == first
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE hits SET result = '{\"passages\": 3}'")
    recorder.close()
    replay = CachedRetriever(None, path, "replay", settings=SETTINGS, version="v1")
    with pytest.raises(EvidenceError, match="are unreadable") as caught:
        replay.retrieve("anemia", 3)
    assert caught.value.kind == "cache"


def test_a_file_that_is_no_database_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(EvidenceError, match=r"hit cache .* is corrupt") as caught:
        CachedRetriever(None, path, "replay", settings=SETTINGS, version=None)
    assert caught.value.kind == "cache"


def test_a_web_search_cache_given_as_the_hit_cache_is_one_line(tmp_path: Path) -> None:
    from clearmed.retrieval.cache import CachedWebSearch
    from clearmed.retrieval.memory import InMemoryWebSearch

    CachedWebSearch(InMemoryWebSearch([]), tmp_path / "search.sqlite").close()
    with pytest.raises(EvidenceError, match=r"search.sqlite is not a hit cache \(no such table: corpus_sets\)"):
        CachedRetriever(None, tmp_path / "search.sqlite", "replay", settings=SETTINGS, version=None)


def test_bad_modes_and_a_recorder_without_a_retriever(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="record or replay"):
        CachedRetriever(None, tmp_path / "h.sqlite", "off", settings=SETTINGS, version="v1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="live retriever and its index version"):
        CachedRetriever(None, tmp_path / "h.sqlite", "record", settings=SETTINGS, version="v1")


# --------------------------------------------------------------------------------------------- at scale


def test_a_thousand_questions_on_eight_threads_record_once_and_replay(
    tmp_path: Path, toy_passages: list[Passage]
) -> None:
    inner = InMemoryRetriever(toy_passages, name="toy")
    path = tmp_path / "h.sqlite"
    recorder = CachedRetriever(inner, path, "record", settings=SETTINGS, version="v1")
    words = ["anemia", "thyroid", "asthma", "iron", "folate", "glucose", "cytokine", "hypertension"]
    queries = [f"{words[n % 8]} question {n}" for n in range(1000)]
    errors: list[BaseException] = []

    def work(share: list[str]) -> None:
        try:
            for query in share:
                recorder.retrieve(query, 4)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(queries[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert (recorder.misses, recorder.hits, len(recorder)) == (1000, 0, 1000)
    assert recorder.open_connections <= 8
    recorder.close()
    replay = CachedRetriever(None, path, "replay", settings=SETTINGS, version="v1")
    assert all(replay.retrieve(q, 4) == inner.retrieve(q, 4) for q in queries)
    assert (replay.hits, replay.misses) == (1000, 0)


# --------------------------------------------------------------------------------------------- config


def test_the_hit_cache_needs_an_index_on_disk_and_replay_needs_a_file(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "toy.jsonl", list(TOY_DOCS))
    for backend in ("memory", "rank_bm25", "bm25s"):
        with pytest.raises(ValueError, match="hit_cache keeps the hits of an index as built"):
            CorpusConfig(backend=backend, path=source, hit_cache=tmp_path / "h.sqlite")
    with pytest.raises(ValueError, match="hit_cache_mode 'replay' needs a hit_cache file"):
        CorpusConfig(backend="bm25s", path=source, index_dir=tmp_path / "i", hit_cache_mode="replay")
    off = CorpusConfig(backend="memory", path=source, hit_cache=tmp_path / "h.sqlite", hit_cache_mode="off")
    assert isinstance(build_retriever(off), InMemoryRetriever)


def test_the_config_resolves_the_file_and_leaves_it_out_of_the_digest(tmp_path: Path) -> None:
    def config(mode: str) -> dict[str, object]:
        corpus = {"backend": "bm25s", "index_dir": "index", "hit_cache": "hits.sqlite", "hit_cache_mode": mode}
        return {"backbones": {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}},
                "corpus": corpus}  # fmt: skip

    record = parse_config(config("record"), source="c.toml", base=tmp_path)
    assert record.corpus is not None
    assert record.corpus.hit_cache == tmp_path / "hits.sqlite"
    # A run recorded live resumes replayed: the cache changes where hits come from, never which.
    assert answer_settings(record) == answer_settings(parse_config(config("replay"), source="c.toml", base=tmp_path))
    with pytest.raises(Exception, match="hit_cache_mode"):
        parse_config(config("write"), source="c.toml", base=tmp_path)


def test_the_corpus_set_names_what_changes_hits_and_no_path(tmp_path: Path) -> None:
    lucene = CorpusConfig(backend="lucene", db_dir=tmp_path / "db", corpora=["medcorp"], retriever="rrf-2")
    settings = corpus_settings(lucene)
    assert sorted(settings["corpora"]) == ["pubmed", "statpearls", "textbooks", "wikipedia"]  # type: ignore[call-overload]
    assert settings["merge"] == "score"
    assert settings["medcpt"] == {"query_encoder": "ncbi/MedCPT-Query-Encoder", "query_max_tokens": 512}
    assert str(tmp_path) not in json.dumps(settings)
    assert index_version(lucene) is None  # no index here: nothing to compare


def test_a_sharded_lucene_index_is_named_by_every_shards_commit(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from clearmed.retrieval.lucene_index import BUILD_MANIFEST, LuceneBuild

    index = tmp_path / "db" / "pubmed" / "index" / "bm25"
    build = LuceneBuild(
        corpus="pubmed", documents=2, skipped=0, built_at=datetime(2026, 1, 1, tzinfo=UTC), seconds=1.0, threads=1,
        store_raw=False, chunk_dir="/c", pyserini="1.6.0", java="Java 25", shards=2,
    )  # fmt: skip
    for shard in ("shard-00", "shard-01"):
        (index / shard).mkdir(parents=True)
        (index / shard / "segments_1").write_bytes(b"commit " + shard.encode())
    (index / BUILD_MANIFEST).write_text(build.model_dump_json(), encoding="utf-8")
    cfg = CorpusConfig(backend="lucene", db_dir=tmp_path / "db", corpora=["pubmed"])
    first = index_version(cfg)
    assert first is not None
    (index / "shard-01" / "segments_1").write_bytes(b"another commit")
    assert index_version(cfg) not in (None, first)
    (index / "shard-01" / "segments_1").unlink()
    assert index_version(cfg) is None  # half-built: no version to trust


def test_a_medcpt_index_is_named_by_its_faiss_file_too(tmp_path: Path) -> None:
    from clearmed.retrieval.dense import FAISS_INDEX, METADATAS, medcpt_index_dir

    db = tmp_path / "db"
    (db / "textbooks" / "index" / "bm25").mkdir(parents=True)
    (db / "textbooks" / "index" / "bm25" / "segments_1").write_bytes(b"lucene commit")
    cfg = CorpusConfig(backend="lucene", db_dir=db, corpora=["textbooks"], retriever="medcpt")
    assert index_version(cfg) is None  # no MedCPT index here
    folder = medcpt_index_dir(db, "textbooks")
    folder.mkdir(parents=True)
    (folder / FAISS_INDEX).write_bytes(b"\x00" * 3_000_000)
    (folder / METADATAS).write_text('{"index": 0, "source": "a"}\n', encoding="utf-8")
    first = index_version(cfg)
    assert first is not None
    assert index_version(cfg.model_copy(update={"retriever": "bm25"})) != first
    (folder / FAISS_INDEX).write_bytes(b"\x00" * 2_999_999 + b"\x01")  # re-encoded: its tail differs
    assert index_version(cfg) not in (None, first)
