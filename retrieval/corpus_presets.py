"""The shared corpora by name ("openstax", "medquad"): where each lives under the shared data folder, how its
rows map to passages and which pathway reads it, and the shared data folder itself (`shared_data_root`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from clearmed.retrieval.corpus import Chunking, CorpusError, FieldMapping, IngestStats, Pathway, read_jsonl
from clearmed.signatures.records import OnError, Passage


class CorpusPreset(BaseModel):
    """A known corpus: where it lives under the shared data folder and how to read it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    relative_path: str
    mapping: FieldMapping
    pathway: Pathway
    description: str


PRESETS: dict[str, CorpusPreset] = {
    "openstax": CorpusPreset(
        name="openstax",
        relative_path="corpora/openstax/openstax_medical_passages.jsonl",
        mapping=FieldMapping(id="id", title=["title", "section"], text="text"),
        pathway="local",
        description="OpenStax nursing, A&P and microbiology textbooks (the local curated corpus)",
    ),
    "medquad": CorpusPreset(
        name="medquad",
        relative_path="corpora/medquad/medquad_passages.jsonl",
        mapping=FieldMapping(id="id", title="question", text="text", url="url"),
        pathway="dynamic",
        description="NIH consumer-health pages with URLs (the offline stand-in for web search)",
    ),
}


def shared_data_root(explicit: Path | None = None) -> Path:
    """The shared data folder: `explicit`, else $CLEARMED_SHARED_DATA, else `shared/data` by the checkout."""
    candidates: list[Path] = []
    if explicit is not None:
        candidates.append(Path(explicit))
    elif os.environ.get("CLEARMED_SHARED_DATA"):
        candidates.append(Path(os.environ["CLEARMED_SHARED_DATA"]))
    else:
        candidates.append(Path(__file__).resolve().parents[2] / "shared" / "data")
        candidates.append(Path.cwd().parent / "shared" / "data")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise CorpusError(f"shared data folder not found (tried {tried}); set CLEARMED_SHARED_DATA or data_root")


def preset(name: str) -> CorpusPreset:
    try:
        return PRESETS[name]
    except KeyError:
        raise CorpusError(f"unknown corpus preset {name!r}; known: {', '.join(sorted(PRESETS))}") from None


def preset_path(name: str, data_root: Path | None = None) -> Path:
    path = shared_data_root(data_root) / preset(name).relative_path
    if not path.is_file():
        raise CorpusError(f"corpus preset {name!r}: file {path} does not exist")
    return path


def read_preset(
    name: str,
    *,
    data_root: Path | None = None,
    pathway: Pathway | None = None,
    chunking: Chunking | None = None,
    on_error: OnError = "raise",
    stats: IngestStats | None = None,
    limit: int | None = None,
) -> Iterator[Passage]:
    """One of the shared corpora: "openstax" (local textbook passages) or "medquad" (offline web pages).

    `pathway` overrides the preset's own (e.g. MedQuAD as a local corpus: its URLs stay in the provenance).
    """
    spec = preset(name)
    return read_jsonl(
        preset_path(name, data_root),
        spec.mapping,
        corpus=spec.name,
        pathway=pathway or spec.pathway,
        chunking=chunking,
        on_error=on_error,
        stats=stats,
        limit=limit,
    )
