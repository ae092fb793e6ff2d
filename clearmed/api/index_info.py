"""`index info` as plain data: what a built index holds (`index_info` for bm25s, `lucene_index_info` for a Lucene
index in MedRAG's layout) and the demo questions whose posting density both report (`density_questions`). The lines
they read as are `clearmed.report.index_lines`; building and warming an index are `clearmed.api.index`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.bm25_sparse import directory_size, read_manifest

__all__ = ["DENSITY_QUESTIONS", "density_questions", "index_info", "lucene_index_info"]


def lucene_index_info(directory: Path) -> dict[str, Any]:
    """`index info` of a Lucene index folder (`<db_dir>/<corpus>/index/bm25`): state, size, documents."""
    from clearmed.retrieval.lucene import describe_index
    from clearmed.retrieval.lucene_index import INDEX_SUBDIR

    directory = directory.resolve()
    if directory.parts[-2:] != INDEX_SUBDIR.parts:
        raise EvidenceError(f"{directory}: a Lucene index of MedRAG's layout is <db_dir>/<corpus>/index/bm25")
    report = describe_index(directory.parents[2], directory.parents[1].name, queries=density_questions())
    return {"backend": "lucene", **report.model_dump(mode="json")}


DENSITY_QUESTIONS = 5


def density_questions() -> list[str]:
    """The first demo questions (MedQA-style vignettes), whose mean Σdf/N `doctor` and `index info` report."""
    from clearmed.demo import demo_questions

    return [question.text for question in demo_questions()[:DENSITY_QUESTIONS]]


def index_info(directory: Path) -> dict[str, Any]:
    """What `index info` shows, as plain data (raises EvidenceError for a non-index directory)."""
    manifest = read_manifest(directory)
    return {
        "directory": str(directory),
        "corpus": manifest.corpus,
        "passages": manifest.passages,
        "vocabulary": manifest.vocabulary,
        "disk_bytes": directory_size(directory),
        "built_at": manifest.built_at.isoformat(),
        "tokenizer": manifest.tokenizer.model_dump(),
        "bm25": {"method": manifest.method, "k1": manifest.k1, "b": manifest.b},
        "bm25s_version": manifest.bm25s_version,
        "format_version": manifest.format_version,
        "source": manifest.source,
        "source_settings": manifest.source_settings,
    }
