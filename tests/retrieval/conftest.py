"""Fixtures for the retrieval tests: tiny corpora written to tmp_path, and the shared corpora built once."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from clearmed.signatures.records import Passage, Provenance

REPO_ROOT = Path(__file__).resolve().parents[2]

TOY_DOCS: list[dict[str, str]] = [
    {
        "id": "d1",
        "title": "Vitamin B12 deficiency",
        "text": "Vitamin B12 deficiency causes macrocytic anemia "
        "and neuropathy; pernicious anemia is an autoimmune cause.",
    },
    {
        "id": "d2",
        "title": "Hypothyroidism",
        "text": "Low free T4 with high TSH indicates primary hypothyroidism; treat with levothyroxine.",
    },
    {
        "id": "d3",
        "title": "Diabetes monitoring",
        "text": "HbA1c reflects mean glucose over three months; a target "
        "below 7 percent suits most adults with diabetes.",
    },
    {
        "id": "d4",
        "title": "Cytokines",
        "text": "IL-6 is a pro-inflammatory cytokine that drives the acute phase response and C-reactive protein.",
    },
    {
        "id": "d5",
        "title": "Iron deficiency",
        "text": "Iron deficiency causes microcytic anemia with low ferritin; oral iron is first-line treatment.",
    },
    {
        "id": "d6",
        "title": "Asthma",
        "text": "Inhaled corticosteroids control persistent asthma; short-acting beta agonists relieve acute symptoms.",
    },
    {
        "id": "d7",
        "title": "Hypertension",
        "text": "Thiazide diuretics, ACE inhibitors and calcium channel blockers "
        "are first-line drugs for hypertension.",
    },
    {
        "id": "d8",
        "title": "Folate",
        "text": "Folate deficiency also causes macrocytic anemia but without neurological signs.",
    },
]


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def toy_jsonl(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "toy.jsonl", list(TOY_DOCS))


@pytest.fixture
def toy_passages() -> list[Passage]:
    return [
        Passage(
            id=doc["id"],
            title=doc["title"],
            text=doc["text"],
            pathway="local",
            provenance=Provenance(kind="corpus", corpus="toy", doc_id=doc["id"]),
        )
        for doc in TOY_DOCS
    ]


PAGES: list[dict[str, str]] = [
    {
        "url": "https://www.cdc.gov/measles/symptoms/index.html",
        "title": "Measles symptoms",
        "text": "Measles starts with fever, cough, runny nose and conjunctivitis, then a rash spreads from the face.",
        "date": "2024-03-12",
    },
    {
        "url": "https://www.cdc.gov/measles/vaccination.html",
        "title": "Measles vaccination",
        "text": "Two doses of MMR vaccine are about 97 percent effective at preventing measles.",
        "date": "2023-11-01",
    },
    {
        "url": "https://www.cdc.gov/measles/vaccination.html",
        "title": "Measles vaccination (schedule)",
        "text": "Children get the first MMR dose at 12 to 15 months and the second at 4 to 6 years; measles.",
    },
    {
        "url": "https://pubmed.ncbi.nlm.nih.gov/12345678/",
        "title": "Vitamin A for measles: a systematic review",
        "text": "This systematic review and meta-analysis found vitamin A reduces measles mortality in children.",
    },
    {
        "url": "https://www.reddit.com/r/AskDocs/comments/abc/measles_rash/",
        "title": "measles rash??",
        "text": "Posted by a worried parent: my kid has a rash and fever, anyone else seen measles like this?",
    },
    {
        "url": "https://nih.gov.example.com/measles-cure",
        "title": "Measles cure doctors hide",
        "text": "Buy our measles cure supplement today, doctors hate it.",
    },
]


@pytest.fixture
def pages_jsonl(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "pages.jsonl", list(PAGES))


@pytest.fixture
def web_page() -> Callable[..., Passage]:
    def make(url: str, title: str = "", text: str = "text", published: str | None = None) -> Passage:
        from clearmed.retrieval.corpus import domain_of

        return Passage(
            id=f"w:{url}",
            title=title,
            text=text,
            pathway="dynamic",
            provenance=Provenance(kind="web", url=url, domain=domain_of(url), published=published),
        )

    return make


def _shared_root() -> Path | None:
    explicit = os.environ.get("CLEARMED_SHARED_DATA")
    candidate = Path(explicit) if explicit else REPO_ROOT.parent / "shared" / "data"
    return candidate if candidate.is_dir() else None


@pytest.fixture(scope="session")
def shared_root() -> Path:
    root = _shared_root()
    if root is None:
        pytest.skip("../shared/data is not available on this machine")
    return root


@pytest.fixture(scope="session")
def openstax_index(shared_root: Path, tmp_path_factory: pytest.TempPathFactory):
    """The 14k-passage OpenStax corpus indexed with bm25s once per session (~3 s)."""
    from clearmed.retrieval.bm25_sparse import BM25sRetriever
    from clearmed.retrieval.corpus_presets import read_preset

    directory = tmp_path_factory.mktemp("openstax-index") / "index"
    return BM25sRetriever.build(read_preset("openstax", data_root=shared_root), name="openstax", directory=directory)


@pytest.fixture(scope="session")
def medquad_index_dir(shared_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 16k-page MedQuAD offline web collection, indexed once per session (~4 s)."""
    from clearmed.retrieval.offline_web import OfflineWebSearch

    directory = tmp_path_factory.mktemp("medquad-index") / "index"
    OfflineWebSearch.from_preset("medquad", data_root=shared_root, index_dir=directory)
    return directory


@pytest.fixture
def medquad_search(medquad_index_dir: Path):
    from clearmed.retrieval.offline_web import OfflineWebSearch

    return OfflineWebSearch.load(medquad_index_dir, collection="medquad")
