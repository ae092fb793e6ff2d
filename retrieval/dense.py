"""MedCPT dense retrieval over MedRAG's faiss indexes (the paper's second MedRAG baseline), and MedRAG's RRF-2.

Per corpus, MedRAG's `src/utils.py` lays the index out as:

    <db_dir>/<corpus>/chunk/<source>.jsonl          one snippet a line: id, title, content, contents
    <db_dir>/<corpus>/index/ncbi/MedCPT-Article-Encoder/
        embedding/<source>.npy    the article encoder's vectors of one chunk file
        metadatas.jsonl           one line per vector, in index order: {"index": <line>, "source": <source>}
        faiss.index               inner-product index (flat, or HNSW) over those vectors

A vector's snippet is line `index` of `chunk/<source>.jsonl`. A query is encoded as MedRAG encodes it: the query
encoder, the [CLS] token's last hidden state, at most 512 tokens (`query_max_tokens`: MedRAG loads the encoder through
sentence-transformers, whose default is the model's 512, and so does the CLEAR code's query encoder; MedCPT's model
card cuts at 64, which leaves out the last sentence, the question itself, of most MedQA vignettes). Snippets are
encoded as MedRAG does:
(title, content) as a sentence pair through the article encoder, [CLS], at most 512 tokens. Scores are inner
products, comparable across corpora encoded by one encoder, so several corpora merge by raw score, as in MedRAG.

torch, transformers and faiss come with the `medcpt` extra; they are imported when an encoder or index is
opened, never on import of this module.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from clearmed.retrieval.base import EvidenceError, Retriever
from clearmed.retrieval.hits import as_hit
from clearmed.retrieval.medrag_layout import ChunkFiles, chunk_dir, snippet_passage
from clearmed.retrieval.merge import MEDRAG_RRF_K, MergeMethod, merge_by_score, merge_hits, reciprocal_rank_fusion
from clearmed.signatures.records import Passage

MEDCPT_QUERY_ENCODER: Final = "ncbi/MedCPT-Query-Encoder"
MEDCPT_ARTICLE_ENCODER: Final = "ncbi/MedCPT-Article-Encoder"
# Query tokens: MedRAG's (sentence-transformers' default, the encoder's 512) by default; MedCPT's model card says 64.
QUERY_MAX_TOKENS: Final = 512
MODEL_CARD_QUERY_MAX_TOKENS: Final = 64
ARTICLE_MAX_TOKENS: Final = 512  # articles (title, abstract), as MedRAG and the model card both encode them
# MedRAG names the index folder after the article encoder's hub id, whatever copy of it is loaded.
INDEX_SUBDIR: Final = Path("index") / MEDCPT_ARTICLE_ENCODER
FAISS_INDEX: Final = "faiss.index"
METADATAS: Final = "metadatas.jsonl"
EMBEDDINGS: Final = "embedding"
BACKEND: Final = "medcpt"
MEDCPT_EXTRA_MESSAGE: Final = "MedCPT retrieval needs torch, transformers and faiss: pip install 'clearmed[medcpt]'"

Progress = Callable[[int], None]


class MedCPTConfig(BaseModel):
    """Which MedCPT encoders to load: hub ids (MedRAG's by default) or local folders holding a saved copy.

    Offline (HF_HUB_OFFLINE=1, or no network), a hub id loads only from the local Hugging Face cache.
    """

    model_config = ConfigDict(extra="forbid")

    query_encoder: str = MEDCPT_QUERY_ENCODER
    article_encoder: str = MEDCPT_ARTICLE_ENCODER
    query_max_tokens: int = Field(
        default=QUERY_MAX_TOKENS,
        ge=1,
        description=f"query tokens: {QUERY_MAX_TOKENS} as MedRAG, {MODEL_CARD_QUERY_MAX_TOKENS} as MedCPT's card",
    )
    batch_size: int = Field(default=32, ge=1, description="snippets per article-encoder batch when building")


def medcpt_index_dir(db_dir: Path, corpus: str) -> Path:
    """Where MedRAG keeps a corpus's MedCPT index."""
    return db_dir / corpus / INDEX_SUBDIR


def medrag_rrf_depth(k: int) -> int:
    """How many hits MedRAG's RRF asks each retriever for, per corpus, before fusing: max(2k, 100)."""
    return max(2 * k, 100)


def optional_module(name: str) -> ModuleType:
    """Import one of the `medcpt` extra's packages, or fail with the one line that says how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise EvidenceError(f"{MEDCPT_EXTRA_MESSAGE} ({name} is missing)", backend=BACKEND) from exc


class CLSEncoder:
    """A BERT encoder whose text vector is the [CLS] token's last hidden state (MedCPT's pooling).

    Loaded with `AutoTokenizer` / `AutoModel.from_pretrained(name_or_path)`: the same call serves the hub's
    MedCPT encoders and a local folder.
    """

    def __init__(self, name_or_path: str) -> None:
        self._torch = optional_module("torch")
        transformers = optional_module("transformers")
        try:
            self.tokenizer: Any = transformers.AutoTokenizer.from_pretrained(name_or_path)
            self.model: Any = transformers.AutoModel.from_pretrained(name_or_path)
        except (OSError, ValueError) as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise EvidenceError(
                f"cannot load the encoder {name_or_path!r} ({reason}); offline, point [corpus.medcpt] at a "
                "folder holding a saved copy",
                kind="index",
                backend=BACKEND,
            ) from exc
        self.model.eval()
        self.name = name_or_path
        self.dimension = int(self.model.config.hidden_size)

    def encode(self, texts: Sequence[str], max_tokens: int, pairs: Sequence[str] | None = None) -> np.ndarray:
        """One float32 row per text (with `pairs`, per (text, pair) sentence pair), truncated to `max_tokens`."""
        encoded = self.tokenizer(
            list(texts),
            list(pairs) if pairs is not None else None,
            truncation=True,
            padding=True,
            max_length=max_tokens,
            return_tensors="pt",
        )
        with self._torch.inference_mode():
            hidden = self.model(**encoded).last_hidden_state
        return np.ascontiguousarray(hidden[:, 0, :].float().numpy(), dtype=np.float32)


class MedCPTQueryEncoder:
    """MedCPT's query side: one query in, one vector out, remembered so several corpora encode it once."""

    def __init__(self, name_or_path: str = MEDCPT_QUERY_ENCODER, max_tokens: int = QUERY_MAX_TOKENS) -> None:
        self.encoder = CLSEncoder(name_or_path)
        self.max_tokens = max_tokens
        self._last: tuple[str, np.ndarray] | None = None

    @property
    def dimension(self) -> int:
        return self.encoder.dimension

    def encode(self, query: str) -> np.ndarray:
        """The query's vector, shape (1, dimension)."""
        if self._last is None or self._last[0] != query:
            self._last = (query, self.encoder.encode([query], self.max_tokens))
        return self._last[1]


class MedCPTIndex:
    """One corpus's MedCPT faiss index in MedRAG's layout, with the rows' chunk-file addresses."""

    def __init__(self, db_dir: Path, corpus: str) -> None:
        self.corpus = corpus
        self.directory = medcpt_index_dir(db_dir, corpus)
        faiss = optional_module("faiss")
        index_path, metadata_path = self.directory / FAISS_INDEX, self.directory / METADATAS
        if not index_path.is_file():
            raise EvidenceError(
                f"no MedCPT index for corpus {corpus!r}: {index_path} is missing (build it with MedRAG, or with "
                "clearmed.retrieval.dense.build_medcpt_index)",
                kind="index",
                backend=BACKEND,
            )
        if not metadata_path.is_file():
            raise EvidenceError(
                f"{self.directory} has {FAISS_INDEX} but no {METADATAS}: a half-built index; rebuild it",
                kind="index",
                backend=BACKEND,
            )
        self.index: Any = _read_faiss(faiss, index_path)
        if self.index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise EvidenceError(
                f"{index_path} does not rank by inner product, as MedCPT's indexes do: built for another encoder?",
                kind="index",
                backend=BACKEND,
            )
        self.sources, self.source_of_row, self.line_of_row = _read_metadatas(metadata_path)
        if len(self.line_of_row) != self.index.ntotal:
            raise EvidenceError(
                f"{self.directory} is half-built: {self.index.ntotal} vectors but {len(self.line_of_row)} rows in "
                f"{METADATAS}; rebuild it",
                kind="index",
                backend=BACKEND,
            )
        self.chunks = ChunkFiles(chunk_dir(db_dir, corpus), backend=BACKEND)

    @property
    def dimension(self) -> int:
        return int(self.index.d)

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(row, inner product) of the `k` nearest vectors, best first."""
        if k <= 0:
            return []
        scores, rows = self.index.search(vector, k)
        return [(int(row), float(score)) for row, score in zip(rows[0], scores[0], strict=True) if row >= 0]

    def passage(self, row: int) -> Passage:
        """The snippet of one index row, with its corpus name and chunk id as provenance."""
        source = self.sources[int(self.source_of_row[row])]
        line = int(self.line_of_row[row])
        return snippet_passage(self.chunks.row(source, line), self.corpus, fallback_id=f"{source}_{line}")


def _read_faiss(faiss: ModuleType, path: Path) -> Any:
    """The index, memory-mapped where faiss can (a flat MedCPT index of PubMed is ~73 GB), else read whole."""
    try:
        return faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
    except RuntimeError:
        pass
    try:
        return faiss.read_index(str(path))
    except RuntimeError as exc:
        reason = (str(exc).strip().splitlines() or ["unreadable"])[0]
        raise EvidenceError(f"cannot read {path}: {reason}", kind="index", backend=BACKEND) from exc


def _read_metadatas(path: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """MedRAG's metadatas.jsonl as compact arrays: source names, and per row a source number and a line."""
    sources: dict[str, int] = {}
    source_of_row: list[int] = []
    line_of_row: list[int] = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
                source, line = str(row["source"]), int(row["index"])
            except (ValueError, KeyError, TypeError) as exc:
                raise EvidenceError(
                    f'{path}, line {number}: expected MedRAG\'s {{"index": ..., "source": ...}}',
                    kind="index",
                    backend=BACKEND,
                ) from exc
            source_of_row.append(sources.setdefault(source, len(sources)))
            line_of_row.append(line)
    return list(sources), np.asarray(source_of_row, dtype=np.int32), np.asarray(line_of_row, dtype=np.int64)


class MedCPTRetriever:
    """MedCPT dense retrieval from one corpus: the query encoder over that corpus's faiss index."""

    def __init__(self, encoder: MedCPTQueryEncoder, index: MedCPTIndex) -> None:
        if encoder.dimension != index.dimension:
            raise EvidenceError(
                f"{index.directory} holds {index.dimension}-dimensional vectors but the query encoder "
                f"{encoder.encoder.name!r} gives {encoder.dimension}: the index was built with another encoder",
                kind="index",
                backend=BACKEND,
            )
        self.encoder = encoder
        self.index = index
        self.name = f"{BACKEND}:{index.corpus}"

    def retrieve(self, query: str, k: int) -> list[Passage]:
        hits = self.index.search(self.encoder.encode(query), k)
        return [
            as_hit(self.index.passage(row), rank=rank, score=score, query=query, backend=BACKEND)
            for rank, (row, score) in enumerate(hits, start=1)
        ]


def open_medcpt(db_dir: Path, corpora: Sequence[str], config: MedCPTConfig | None = None) -> list[MedCPTRetriever]:
    """One MedCPT retriever per corpus, sharing one query encoder (the indexes are checked before it loads)."""
    config = config or MedCPTConfig()
    indexes = [MedCPTIndex(db_dir, corpus) for corpus in corpora]
    encoder = MedCPTQueryEncoder(config.query_encoder, config.query_max_tokens)
    return [MedCPTRetriever(encoder, index) for index in indexes]


class MergedCorporaRetriever:
    """One kind of retriever over several corpora, each asked for `k`, their hits merged into the top `k`: by
    raw score (MedRAG's merge over corpora, the default) or taken in turn."""

    def __init__(self, retrievers: Sequence[Retriever], *, name: str, merge: MergeMethod = "score") -> None:
        self.retrievers = list(retrievers)
        self.name = name
        self.merge = merge

    def retrieve(self, query: str, k: int) -> list[Passage]:
        return merge_hits([retriever.retrieve(query, k) for retriever in self.retrievers], k, self.merge)


class RankFusionRetriever:
    """MedRAG's RRF-2 (and RRF-n): reciprocal rank fusion of retrievers, each over the same corpora.

    As MedRAG's `RetrievalSystem.retrieve` does: every retriever asks each corpus for max(2k, 100) hits; one
    retriever's hits over all corpora are ranked by raw score; the retrievers' rankings are fused with
    1 / (rrf_k + position), rrf_k = 100, and the top `k` kept. `families` holds, per retriever, its one
    retriever per corpus (RRF-2: the BM25 ones, then the MedCPT ones).
    """

    def __init__(self, families: Sequence[Sequence[Retriever]], *, name: str, rrf_k: int = MEDRAG_RRF_K) -> None:
        if len(families) < 2 or any(not family for family in families):
            raise ValueError("rank fusion needs at least two retrievers, each over at least one corpus")
        self.families = [list(family) for family in families]
        self.name = name
        self.rrf_k = rrf_k

    def retrieve(self, query: str, k: int) -> list[Passage]:
        depth = medrag_rrf_depth(k)
        rankings = []
        for family in self.families:
            hits = [retriever.retrieve(query, depth) for retriever in family]
            rankings.append(merge_by_score(hits, sum(len(found) for found in hits)))
        return reciprocal_rank_fusion(rankings, k, rrf_k=self.rrf_k)


def build_medcpt_index(
    db_dir: Path, corpus: str, config: MedCPTConfig | None = None, *, progress: Progress | None = None
) -> Path:
    """Build a corpus's MedCPT index in MedRAG's layout from its chunk files, as MedRAG's `embed` and
    `construct_index` do, and return its folder.

    Chunk files whose `embedding/<source>.npy` exists are not encoded again (MedRAG resumes the same way, and
    its downloadable embeddings arrive as those files). `faiss.index` is written last, by rename, and removed
    first, so an interrupted build never leaves an index whose vectors and rows disagree.
    """
    config = config or MedCPTConfig()
    faiss = optional_module("faiss")
    chunks = chunk_dir(db_dir, corpus)
    chunk_files = sorted(chunks.glob("*.jsonl"))
    if not chunk_files:
        raise EvidenceError(f"no chunk files (*.jsonl) in {chunks}", kind="index", backend=BACKEND)
    directory = medcpt_index_dir(db_dir, corpus)
    embeddings = directory / EMBEDDINGS
    embeddings.mkdir(parents=True, exist_ok=True)
    (directory / FAISS_INDEX).unlink(missing_ok=True)
    encoder: CLSEncoder | None = None
    for path in chunk_files:
        target = embeddings / f"{path.stem}.npy"
        text = path.read_text(encoding="utf-8").strip()
        if target.is_file() or not text:
            continue
        encoder = encoder or CLSEncoder(config.article_encoder)
        snippets = [json.loads(line) for line in text.split("\n")]
        batches = [
            encoder.encode(
                [str(item.get("title", "")) for item in batch],
                ARTICLE_MAX_TOKENS,
                pairs=[str(item.get("content", "")) for item in batch],
            )
            for batch in (
                snippets[start : start + config.batch_size] for start in range(0, len(snippets), config.batch_size)
            )
        ]
        _save_atomically(target, np.concatenate(batches))
        if progress is not None:
            progress(len(snippets))
    return _construct_index(faiss, directory)


def _construct_index(faiss: ModuleType, directory: Path) -> Path:
    """MedRAG's `construct_index`: an inner-product flat index over embedding/*.npy in name order."""
    index: Any = None
    partial_rows = directory / f"{METADATAS}.partial"
    with partial_rows.open("w", encoding="utf-8") as rows:
        for path in sorted((directory / EMBEDDINGS).glob("*.npy")):
            vectors = np.ascontiguousarray(np.load(path), dtype=np.float32)
            index = index if index is not None else faiss.IndexFlatIP(vectors.shape[1])
            index.add(vectors)
            rows.writelines(json.dumps({"index": i, "source": path.stem}) + "\n" for i in range(len(vectors)))
    if index is None:
        partial_rows.unlink()
        raise EvidenceError(f"nothing to index: no embeddings under {directory}", kind="index", backend=BACKEND)
    partial_index = directory / f"{FAISS_INDEX}.partial"
    faiss.write_index(index, str(partial_index))
    os.replace(partial_rows, directory / METADATAS)
    os.replace(partial_index, directory / FAISS_INDEX)
    return directory


def _save_atomically(target: Path, vectors: np.ndarray) -> None:
    partial = target.with_suffix(".npy.partial")
    with partial.open("wb") as handle:
        np.save(handle, vectors.astype(np.float32))
    os.replace(partial, target)
