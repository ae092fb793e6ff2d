"""What decides the local pathway's hits besides the query and k: the corpus set, and the version of its index.

`corpus_settings` is the corpus set as configured: backend, corpora, retriever, merge, the MedCPT query encoder, the
name the retriever is recorded under; no path (a worker keeps its copy elsewhere). `index_version` is the index as
built, read from its own metadata, never by opening it (no JVM starts, no matrix is mapped):

- bm25s: its `manifest.json` (corpus, counts, build time, tokenizer, BM25 parameters, source);
- Lucene: each corpus's commit point, the `segments_N` file of the index or of each shard, which holds the commit's
  and the segments' unique ids, so a rebuild of the same chunks is another version;
- MedCPT (retriever "medcpt", and "rrf-2" with the Lucene commits): each corpus's `faiss.index` (its size and the
  digest of its first and last MiB) and the size of `metadatas.jsonl`.

None when the index is not on this machine (or half-built): there is nothing to compare.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from clearmed.retrieval.bm25_sparse import MANIFEST
from clearmed.retrieval.config import CorpusConfig
from clearmed.retrieval.dense import FAISS_INDEX, METADATAS, medcpt_index_dir

_EDGE_BYTES = 1 << 20  # of a faiss index, digested at each end (a flat index of PubMed is ~73 GB)


def corpus_settings(cfg: CorpusConfig) -> dict[str, object]:
    """The corpus set whose hits a cache keeps, as JSON data."""
    settings: dict[str, object] = {"backend": cfg.backend, "retriever": cfg.retriever, "name": cfg.name}
    if cfg.backend == "lucene":
        settings |= {"corpora": cfg.lucene_corpora(), "merge": cfg.merge}
    else:
        settings["corpus"] = cfg.corpus_name()
    if cfg.retriever != "bm25":
        settings["medcpt"] = {
            "query_encoder": cfg.medcpt.query_encoder,
            "query_max_tokens": cfg.medcpt.query_max_tokens,
        }
    return settings


def index_version(cfg: CorpusConfig) -> str | None:
    """A short digest of the configured index as built ("lucene-3f2a..."), or None when it is not here."""
    parts: list[object] | None
    if cfg.backend == "lucene":
        parts = _lucene_parts(cfg)
        if parts is not None and cfg.retriever != "bm25":
            medcpt = _medcpt_parts(cfg)
            parts = None if medcpt is None else [*parts, *medcpt]
    elif cfg.backend == "bm25s" and cfg.index_dir is not None:
        manifest = cfg.index_dir / MANIFEST
        parts = [manifest.read_text(encoding="utf-8")] if manifest.is_file() else None
    else:
        parts = None  # rebuilt from its source on every run: no index as built to name
    if parts is None:
        return None
    digest = hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()
    return f"{cfg.backend}-{digest[:16]}"


def _lucene_parts(cfg: CorpusConfig) -> list[object] | None:
    from clearmed.retrieval.lucene_index import index_dir, index_state, read_build, shard_dirs

    assert cfg.db_dir is not None
    parts: list[object] = []
    for corpus in cfg.lucene_corpora():
        directory = index_dir(cfg.db_dir, corpus)
        if index_state(directory)[0] != "complete":
            return None
        build = read_build(directory)
        shards = 1 if build is None or any(directory.glob("segments_*")) else build.shards
        for shard in shard_dirs(directory, shards):
            commits = sorted(shard.glob("segments_*"))
            parts.append([corpus, shard.name, [[c.name, _digest(c.read_bytes())] for c in commits]])
    return parts


def _medcpt_parts(cfg: CorpusConfig) -> list[object] | None:
    assert cfg.db_dir is not None
    parts: list[object] = []
    for corpus in cfg.lucene_corpora():
        folder = medcpt_index_dir(cfg.db_dir, corpus)
        index, metadatas = folder / FAISS_INDEX, folder / METADATAS
        if not index.is_file() or not metadatas.is_file():
            return None
        parts.append([corpus, index.stat().st_size, _edges(index), metadatas.stat().st_size])
    return parts


def _edges(path: Path) -> str:
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(_EDGE_BYTES)
        handle.seek(max(0, size - _EDGE_BYTES))
        return _digest(head + handle.read(_EDGE_BYTES))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
