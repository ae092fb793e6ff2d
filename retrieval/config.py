"""The `[corpus]` and `[search]` tables of the project configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from clearmed.retrieval.cache import CacheMode
from clearmed.retrieval.corpus import Chunking, FieldMapping, OnError
from clearmed.retrieval.dense import MedCPTConfig
from clearmed.retrieval.medrag_layout import expand_corpora
from clearmed.retrieval.merge import MergeMethod
from clearmed.retrieval.tavily import TavilyOptions
from clearmed.retrieval.tokenize import TokenizerConfig

CorpusBackend = Literal["bm25s", "rank_bm25", "memory", "lucene"]
SearchBackend = Literal["tavily", "offline", "none"]
# MedRAG's retrievers: the backend's BM25, MedCPT dense retrieval, or the reciprocal rank fusion of the two.
CorpusRetriever = Literal["bm25", "medcpt", "rrf-2"]


class CorpusConfig(BaseModel):
    """The local pathway's corpus and index.

    Source: exactly one of `preset` (a shared corpus: "openstax", "medquad"), `path` (.jsonl/.parquet with
    `fields`), or `hub` (a Hugging Face id such as "MedRAG/textbooks"). With backend "bm25s" and an
    `index_dir` that already holds an index, no source is needed: the index is loaded (memory-mapped).

    Backend "lucene" reads MedRAG's layout, in MedRAG's words: `db_dir` and `corpora` (folder names under it;
    "medcorp" stands for its four), each searched through `<db_dir>/<corpus>/index/bm25` and its hits merged by
    `merge` ("score": by raw BM25 score, as the CLEAR code and MedRAG merge corpora; "interleave": in turn). A source (preset, path,
    hub) is written into that layout as corpus `name` first. A missing or half-built index is built with
    `threads` indexing threads (default: every core), as `shards` shards (default: about 2x the cores, each of
    250k+ snippets; 1 below 500k). Every corpus is searched on one pool of `search_threads` threads (default:
    every core), through which Lucene searches an index's slices in parallel.

    `retriever` (MedRAG's names, for backend "lucene"): "bm25"; "medcpt", MedCPT dense retrieval over each
    corpus's faiss index (`<db_dir>/<corpus>/index/ncbi/MedCPT-Article-Encoder`, encoders from `medcpt`); or
    "rrf-2", MedRAG's reciprocal rank fusion of the two.

    `hit_cache` (a file) keeps the local pathway's hits (`retrieval.hit_cache`): `hit_cache_mode` "record" searches
    the index on a miss and stores the hits, "replay" reads only the file (no index opened, no JVM started; a miss
    stops the run), "off" ignores it. Fill it once with `clearmed index warm`.
    """

    model_config = ConfigDict(extra="forbid")

    backend: CorpusBackend = "bm25s"
    preset: str | None = None
    path: Path | None = None
    hub: str | None = None
    hub_split: str = "train"
    name: str | None = None
    fields: FieldMapping | None = None
    index_dir: Path | None = None
    rebuild: bool = False
    chunking: Chunking | None = None
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    limit: int | None = Field(default=None, ge=1)
    on_error: OnError = "raise"
    data_root: Path | None = None
    force: bool = False
    db_dir: Path | None = None
    corpora: list[str] | None = None
    merge: MergeMethod = "score"
    threads: int | None = Field(default=None, ge=1)
    shards: int | None = Field(default=None, ge=1)
    search_threads: int | None = Field(default=None, ge=1)
    retriever: CorpusRetriever = "bm25"
    medcpt: MedCPTConfig = Field(default_factory=MedCPTConfig)
    hit_cache: Path | None = None
    hit_cache_mode: CacheMode = "record"

    @field_validator("path", "index_dir", "data_root", "db_dir", "hit_cache")
    @classmethod
    def _expand_user(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("merge", mode="before")
    @classmethod
    def _renamed_merge(cls, value: object) -> object:
        if value == "rrf":
            raise ValueError(
                'merge = "rrf" is now "interleave" (it took the corpora in turn); MedRAG merges corpora by score'
            )
        return value

    @field_validator("corpora")
    @classmethod
    def _known_corpora(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        bad = [name for name in value if not name.strip() or "/" in name or name.strip() in (".", "..")]
        if bad or not value:
            raise ValueError(f"corpora must be folder names under db_dir, got {value!r}")
        return expand_corpora(value)

    @model_validator(mode="after")
    def _one_source(self) -> CorpusConfig:
        sources = [name for name in ("preset", "path", "hub") if getattr(self, name) is not None]
        if len(sources) > 1:
            raise ValueError(f"give one corpus source, not {' and '.join(sources)}")
        if self.backend == "lucene":
            return self._lucene_layout(bool(sources))
        if self.retriever != "bm25":
            raise ValueError(
                f"retriever {self.retriever!r} reads MedRAG's layout: set backend 'lucene', db_dir, corpora"
            )
        if self.db_dir is not None or self.corpora is not None:
            raise ValueError(f"db_dir and corpora are read by backend 'lucene', not {self.backend!r}")
        if not sources and not (self.backend == "bm25s" and self.index_dir is not None):
            raise ValueError("the corpus needs a source: preset, path or hub (or, for bm25s, a built index_dir)")
        if self.index_dir is not None and self.backend != "bm25s":
            raise ValueError(f"index_dir is only used by backend 'bm25s', not {self.backend!r}")
        return self

    @model_validator(mode="after")
    def _hit_cache_of_an_index(self) -> CorpusConfig:
        if self.hit_cache_mode == "replay" and self.hit_cache is None:
            raise ValueError("hit_cache_mode 'replay' needs a hit_cache file")
        on_disk = self.backend == "lucene" or (self.backend == "bm25s" and self.index_dir is not None)
        if self.hit_cache is not None and self.hit_cache_mode != "off" and not on_disk:
            raise ValueError(
                "hit_cache keeps the hits of an index as built: backend 'lucene', or 'bm25s' with index_dir "
                f"(backend {self.backend!r}{'' if self.backend != 'bm25s' else ' without index_dir'} indexes anew each run)"
            )
        return self

    def _lucene_layout(self, has_source: bool) -> CorpusConfig:
        if self.db_dir is None:
            raise ValueError("backend 'lucene' needs db_dir, the folder holding <corpus>/chunk and <corpus>/index")
        if self.index_dir is not None:
            raise ValueError("backend 'lucene' keeps its indexes under db_dir; index_dir is for 'bm25s'")
        if self.corpora is None:
            if not has_source:
                raise ValueError('backend \'lucene\' needs corpora (e.g. ["textbooks", "statpearls"] or ["medcorp"])')
            self.corpora = [self.corpus_name()]
        elif has_source and self.corpus_name() not in self.corpora:
            raise ValueError(f"the source is written as corpus {self.corpus_name()!r}, which corpora does not name")
        return self

    def lucene_corpora(self) -> list[str]:
        """The corpus folders the Lucene backend searches (set for backend "lucene")."""
        return list(self.corpora or [])

    def source_label(self) -> str | None:
        """What is indexed, as recorded in an index manifest: "preset:openstax", "path:...", "hub:..."."""
        if self.preset:
            return f"preset:{self.preset}"
        if self.path:
            return f"path:{self.path.resolve()}"
        if self.hub:
            return f"hub:{self.hub}[{self.hub_split}]"
        return None

    def source_settings(self) -> dict[str, str | int | None]:
        """Settings besides the tokenizer that change which passages an index holds."""
        chunking = self.chunking
        return {
            "chunk_words": chunking.words if chunking else None,
            "chunk_overlap": chunking.overlap if chunking else None,
            "limit": self.limit,
            "fields": self.fields.model_dump_json() if self.fields else None,
        }

    def corpus_name(self) -> str:
        if self.name:
            return self.name
        if self.preset:
            return self.preset
        if self.hub:
            return self.hub.split("/")[-1]
        if self.path:
            return self.path.stem
        return self.index_dir.name if self.index_dir else "corpus"


class SearchConfig(BaseModel):
    """The dynamic pathway's web search, and its cache.

    backend "offline" searches a page collection (`preset`, default "medquad", or a JSONL `pages` file);
    "tavily" searches the live web (TAVILY_API_KEY from the environment); "none" disables the dynamic pathway.
    """

    model_config = ConfigDict(extra="forbid")

    backend: SearchBackend = "offline"
    # The longest query the backend accepts; None: the backend's own (Tavily 400, offline none).
    max_query_chars: int | None = Field(default=None, ge=20)
    timeout: float = Field(default=20.0, gt=0, le=120)
    preset: str | None = None
    pages: Path | None = None
    fields: FieldMapping | None = None
    index_dir: Path | None = None
    one_per_url: bool = True
    tavily: TavilyOptions = Field(default_factory=TavilyOptions)
    cache_path: Path | None = None
    cache_mode: CacheMode = "record"
    data_root: Path | None = None

    @field_validator("pages", "index_dir", "cache_path", "data_root")
    @classmethod
    def _expand_user(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @model_validator(mode="after")
    def _offline_source(self) -> SearchConfig:
        if self.preset is not None and self.pages is not None:
            raise ValueError("give either search.preset or search.pages, not both")
        if self.backend == "offline" and self.preset is None and self.pages is None and self.index_dir is None:
            self.preset = "medquad"
        if self.cache_mode == "replay" and self.cache_path is None:
            raise ValueError("cache_mode 'replay' needs a cache_path")
        return self
