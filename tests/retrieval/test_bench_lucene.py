"""scripts/bench_lucene.py: its corpus is the shared corpora's sentences recombined, in MedRAG's layout."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from clearmed.retrieval.medrag_layout import ChunkFiles, medrag_contents

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_lucene.py"


@pytest.fixture
def bench(shared_root: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("CLEARMED_SHARED_DATA", str(shared_root))
    spec = importlib.util.spec_from_file_location("bench_lucene", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_lucene", module)
    spec.loader.exec_module(module)
    return module


def test_the_corpus_is_recombined_real_sentences_as_medrag_snippets(bench: ModuleType, tmp_path: Path) -> None:
    chunks = tmp_path / "synth" / "chunk"
    summary = bench.write_corpus(chunks, passages=300, words=60)
    assert summary["mean_words"] >= 60
    assert summary["distinct_sentences"] > 100_000
    rows = [json.loads(line) for line in (chunks / "synth000.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 300
    sentences = set(bench.shared_sentences()[0])
    for line, row in enumerate(rows[:20]):
        assert row["id"] == f"synth000_{line}"
        assert row["contents"] == medrag_contents(row["title"], row["content"])
        assert len(row["content"].split()) >= 60
        # Sentences hold no sentence end, so the content splits back into exactly the sentences it was built of.
        assert all(piece in sentences for piece in bench._SENTENCE_END.split(row["content"]))
    # MedRAG's reader finds every snippet by its id.
    assert ChunkFiles(chunks, backend="lucene").row_for_id("synth000_299") == rows[299]
    # Same spec, same corpus: the second call keeps the files.
    before = (chunks / "synth000.jsonl").stat().st_mtime_ns
    assert bench.write_corpus(chunks, passages=300, words=60) == summary
    assert (chunks / "synth000.jsonl").stat().st_mtime_ns == before


def test_the_table_reports_refusals_in_their_row(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    bench.print_table(
        [
            {"engine": "lucene", "passages": 5_000_000, "threads": 2, "build_s": 1500.0, "p50_ms": 300.0},
            {"engine": "bm25s", "passages": 5_000_000, "error": "refused: corpus 'synth': a bm25s build of ..."},
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("| lucene | 5,000,000 | - | 2 | 1500.0 | - |")
    assert lines[3].startswith("| bm25s | 5,000,000 | refused: corpus 'synth'")


def test_each_search_pool_gets_a_line_and_p_threads_the_speedup(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    pools = [
        {"search_threads": 1, "p50_ms": 80.0, "p95_ms": 130.0, "cpu_p50_ms": 79.0, "cpu_p95_ms": 128.0},
        {"search_threads": 2, "p50_ms": 45.0, "p95_ms": 75.0, "cpu_p50_ms": 88.0, "cpu_p95_ms": 140.0},
    ]
    row = {"engine": "lucene", "passages": 1_000_000, "shards": 2, "segments": 9, "slices": 4, "speedup": 1.78}
    bench.print_table([{**row, "density": 7.5, "demo_density": 3.2, "pools": pools}], header=False)
    one, two = capsys.readouterr().out.splitlines()
    assert one.startswith("| lucene | 1,000,000 | 2 |")
    assert "| 1 | 80.0 | 130.0 | 79.0 | 128.0 | - | 9 / 4 | 7.5 | 3.2 |" in one
    assert "| 2 | 45.0 | 75.0 | 88.0 | 140.0 | 1.78 | 9 / 4 | 7.5 | 3.2 |" in two
