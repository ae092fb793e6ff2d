from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clearmed.retrieval.corpus import (
    MEDRAG_MAPPING,
    Chunking,
    CorpusError,
    FieldMapping,
    IngestStats,
    chunk_words,
    parse_date,
    read_file,
    read_hub,
    read_jsonl,
    read_parquet,
    row_to_passages,
)
from clearmed.retrieval.corpus_presets import preset_path, read_preset

from .conftest import write_jsonl


def test_jsonl_mapping_and_provenance(toy_jsonl: Path) -> None:
    passages = list(read_jsonl(toy_jsonl, FieldMapping(), corpus="toy"))
    assert [p.id for p in passages][:2] == ["d1", "d2"]
    first = passages[0]
    assert first.title == "Vitamin B12 deficiency"
    assert first.pathway == "local"
    assert first.provenance.kind == "corpus"
    assert first.provenance.corpus == "toy"
    assert first.provenance.doc_id == "d1"


def test_corpus_name_defaults_to_file_stem(toy_jsonl: Path) -> None:
    assert next(iter(read_jsonl(toy_jsonl, FieldMapping()))).provenance.corpus == "toy"


def test_several_fields_are_joined(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [{"key": 7, "h": "Heart", "s": "Valves", "a": "one", "b": "two"}])
    mapping = FieldMapping(id="key", title=["h", "s"], text=["a", "b"])
    (passage,) = read_jsonl(path, mapping)
    assert passage.id == "7"
    assert passage.title == "Heart — Valves"
    assert passage.text == "one\n\ntwo"


def test_web_mapping_sets_url_domain_and_date(tmp_path: Path) -> None:
    rows = [{"id": "p", "title": "t", "text": "x", "url": "https://WWW.CDC.gov/a", "date": "2024-03-05T10:00:00Z"}]
    path = write_jsonl(tmp_path / "w.jsonl", rows)
    mapping = FieldMapping(url="url", date="date")
    (page,) = read_jsonl(path, mapping, pathway="dynamic")
    assert page.provenance.kind == "web"
    assert page.provenance.domain == "www.cdc.gov"
    assert str(page.provenance.published) == "2024-03-05"


def test_web_page_without_url_is_an_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "w.jsonl", [{"id": "p", "title": "t", "text": "x"}])
    with pytest.raises(CorpusError, match=r"w\.jsonl:1: web page 'p' has no URL"):
        list(read_jsonl(path, FieldMapping(url="url"), pathway="dynamic"))


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "title": "", "text": "ok"}\n\n{"id": "b", "text": \n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad\.jsonl:3: malformed JSON"):
        list(read_jsonl(path, FieldMapping()))


def test_skip_mode_counts_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"id": "a", "text": "ok"}\nnot json\n{"id": "b"}\n["list"]\n{"id": "c", "text": "fine"}\n', encoding="utf-8"
    )
    stats = IngestStats()
    passages = list(read_jsonl(path, FieldMapping(), on_error="skip", stats=stats))
    assert [p.id for p in passages] == ["a", "c"]
    assert stats.rows == 5
    assert stats.skipped == 3
    assert any("mixed.jsonl:3: missing field(s) ['text']" in problem for problem in stats.problems)
    assert any("mixed.jsonl:4: expected a JSON object" in problem for problem in stats.problems)


def test_missing_and_empty_fields(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "e.jsonl", [{"id": "a", "text": "   "}])
    with pytest.raises(CorpusError, match=r"e\.jsonl:1: document 'a' has an empty text"):
        list(read_jsonl(path, FieldMapping()))
    path = write_jsonl(tmp_path / "n.jsonl", [{"id": None, "text": "x"}])
    with pytest.raises(CorpusError, match=r"n\.jsonl:1: empty id"):
        list(read_jsonl(path, FieldMapping()))


def test_non_utf8_is_reported_or_replaced(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "caf\xe9"}\n')
    with pytest.raises(CorpusError, match=r"latin1\.jsonl:2: not valid UTF-8"):
        list(read_jsonl(path, FieldMapping()))
    passages = list(read_jsonl(path, FieldMapping(), encoding_errors="replace"))
    assert passages[1].text == "caf\ufffd"


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "text": "ok"}\n')
    assert [p.id for p in read_jsonl(path, FieldMapping())] == ["a"]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no such corpus file"):
        list(read_jsonl(tmp_path / "absent.jsonl", FieldMapping()))


def test_limit_stops_early(toy_jsonl: Path) -> None:
    assert len(list(read_jsonl(toy_jsonl, FieldMapping(), limit=3))) == 3


def test_chunking_windows_and_ids(tmp_path: Path) -> None:
    words = " ".join(f"w{i}" for i in range(25))
    path = write_jsonl(tmp_path / "long.jsonl", [{"id": "doc", "text": words}, {"id": "short", "text": "a b"}])
    passages = list(read_jsonl(path, FieldMapping(), chunking=Chunking(words=10, overlap=3)))
    assert [p.id for p in passages] == ["doc#0", "doc#1", "doc#2", "doc#3", "short"]
    assert passages[0].text.split() == [f"w{i}" for i in range(10)]
    assert passages[1].text.split()[0] == "w7"  # 3 words of overlap
    assert passages[-2].text.split()[-1] == "w24"  # nothing lost at the end
    assert {p.provenance.doc_id for p in passages[:4]} == {"doc"}


def test_chunk_words_exact_fit() -> None:
    assert chunk_words("a b c d e f g h i j", Chunking(words=10, overlap=2)) == ["a b c d e f g h i j"]


def test_chunking_rejects_overlap_not_smaller() -> None:
    with pytest.raises(ValueError, match="overlap"):
        Chunking(words=10, overlap=10)


def test_field_mapping_forbids_unknown_keys() -> None:
    with pytest.raises(ValueError, match="extra"):
        FieldMapping.model_validate({"id": "id", "body": "text"})


def test_parquet_reader(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    table = pa.table({"doc": ["x1", "x2"], "heading": ["A", None], "body": ["alpha text", "beta text"], "n": [1, 2]})
    pq.write_table(table, path)
    mapping = FieldMapping(id="doc", title="heading", text="body")
    passages = list(read_parquet(path, mapping, corpus="pq"))
    assert [(p.id, p.title, p.text) for p in passages] == [("x1", "A", "alpha text"), ("x2", "", "beta text")]
    assert next(iter(read_file(path, mapping))).provenance.corpus == "c"


def test_parquet_missing_column_and_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": ["a"], "body": ["b"]}), path)
    with pytest.raises(CorpusError, match=r"c\.parquet: Parquet columns \['text'\] not found"):
        list(read_parquet(path, FieldMapping()))
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(CorpusError, match=r"bad\.parquet: not a readable Parquet file"):
        list(read_parquet(bad, FieldMapping()))


def test_parquet_row_errors_name_the_row(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["ok", ""]}), path)
    with pytest.raises(CorpusError, match=r"r\.parquet: row 2: document 'b' has an empty text"):
        list(read_parquet(path, FieldMapping()))


def test_unsupported_extension(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"unsupported corpus format '\.csv'"):
        read_file(tmp_path / "c.csv", FieldMapping())


def test_medrag_mapping_on_local_rows(tmp_path: Path) -> None:
    rows = [
        {
            "id": "Anatomy_Gray_0",
            "title": "Anatomy_Gray",
            "content": "The heart has four chambers.",
            "contents": "Anatomy_Gray. The heart has four chambers.",
        },
    ]
    (passage,) = read_jsonl(write_jsonl(tmp_path / "textbooks.jsonl", rows), MEDRAG_MAPPING, corpus="textbooks")
    assert passage.id == "Anatomy_Gray_0"
    assert passage.title == "Anatomy_Gray"
    assert passage.text == "The heart has four chambers."  # content, not the title-prefixed contents


def test_read_hub_streams_through_datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    rows = [{"id": f"pm{i}", "title": f"T{i}", "content": f"abstract {i}", "contents": "x"} for i in range(5)]
    path = write_jsonl(tmp_path / "pubmed.jsonl", rows)
    calls: list[tuple[str, dict[str, object]]] = []
    real = datasets.load_dataset

    def fake_load(hub_id: str, **kwargs: object) -> object:
        calls.append((hub_id, kwargs))
        return real("json", data_files=str(path), split="train", streaming=True)

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    stats = IngestStats()
    passages = list(read_hub("MedRAG/pubmed", limit=3, stats=stats))
    assert calls == [("MedRAG/pubmed", {"split": "train", "streaming": True})]
    assert [p.id for p in passages] == ["pm0", "pm1", "pm2"]
    assert passages[0].provenance.corpus == "pubmed"
    assert stats.rows == 3


def test_read_hub_offline_is_a_clear_error() -> None:
    # tests/conftest.py sets HF_HUB_OFFLINE=1, so the hub is unreachable without touching the network.
    with pytest.raises(CorpusError, match=r"hub corpus 'MedRAG/textbooks'.*could not be opened"):
        list(read_hub("MedRAG/textbooks"))


def test_unknown_preset_and_missing_root(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="unknown corpus preset 'pubmed'"):
        list(read_preset("pubmed"))
    with pytest.raises(CorpusError, match="shared data folder not found"):
        preset_path("openstax", data_root=tmp_path / "nowhere")
    with pytest.raises(CorpusError, match="does not exist"):
        preset_path("openstax", data_root=tmp_path)


def test_row_to_passages_rejects_non_objects() -> None:
    with pytest.raises(CorpusError, match="here: expected a JSON object"):
        row_to_passages([1, 2], FieldMapping(), corpus="c", where="here")  # type: ignore[arg-type]


def test_shared_presets(shared_root: Path) -> None:
    stats = IngestStats()
    first = next(iter(read_preset("openstax", data_root=shared_root, stats=stats)))
    assert first.id.startswith("openstax:")
    assert " — " in first.title  # title — section
    assert first.provenance.corpus == "openstax"
    page = next(iter(read_preset("medquad", data_root=shared_root)))
    assert page.pathway == "dynamic"
    assert page.provenance.kind == "web"
    assert page.provenance.url
    assert page.provenance.url.startswith("http")
    assert page.provenance.domain
    local = next(iter(read_preset("medquad", data_root=shared_root, pathway="local")))
    assert local.provenance.kind == "corpus"
    assert local.provenance.url == page.provenance.url
    json.dumps(first.model_dump(mode="json"))


def test_read_hub_stream_failure_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    def rows():
        yield {"id": "a", "title": "t", "content": "c", "contents": "t. c"}
        raise ConnectionError("connection reset")

    monkeypatch.setattr(datasets, "load_dataset", lambda hub_id, **kwargs: rows())
    with pytest.raises(CorpusError, match=r"MedRAG/pubmed\[train\]: streaming failed after row 1"):
        list(read_hub("MedRAG/pubmed"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-03-05", "2024-03-05"),
        ("2024-03-05T10:00:00Z", "2024-03-05"),
        ("2024-03", "2024-03-01"),
        ("2024", "2024-01-01"),
        ("Tue, 05 Mar 2024 10:00:00 GMT", "2024-03-05"),
        ("March 2024", None),
        ("2024-13-45", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_date(value: str | None, expected: str | None) -> None:
    parsed = parse_date(value)
    assert (str(parsed) if parsed else None) == expected
