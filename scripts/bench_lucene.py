"""Lucene (Anserini through pyserini's indexer) against bm25s on one corpus of N passages in MedRAG's layout.

    python scripts/bench_lucene.py --passages 100000                        # ~4 minutes on 2 cores
    python scripts/bench_lucene.py --passages 1000000 --passages 5000000 --threads 2 --json lucene.json
    python scripts/bench_lucene.py --passages 50000 --passages 150000 --engines bm25s   # bm25s' RAM per passage

The corpus: the shared corpora's real sentences recombined. Every OpenStax and MedQuAD text is split at sentence
ends (". ", "? ", "! "); sentences of 4 to 60 words are kept (213k distinct sentences). A passage draws sentences
uniformly with replacement (numpy, seed 0) until it has at least `--words` words (default 280, 291 on average
with the last sentence, which clearmed's tokenizer turns into about 180 tokens: 0.62 a word, stopwords dropped),
takes the title of its first sentence's document, and is written as one MedRAG snippet (id `<file>_<line>`,
title, content, contents) into `<work>/n<N>/synth/chunk/synthNNN.jsonl`, 100,000 a file. The vocabulary is
therefore the shared corpora's, far smaller than PubMed's: a real corpus has a larger term dictionary.

For each engine: build time (Lucene with `--threads`, bm25s single-threaded as clearmed runs it), peak RSS of the
build (its own child process, `os.wait4`'s rusage), index size on disk (bm25s' folder holds its copy of the texts;
Lucene's holds none: it reads the chunk files), and query latency p50/p95 over `--queries` MedQA question stems at
k = 32, in a fresh process after 20 other stems as warm-up (JIT, page cache), with that process's peak RSS.
Lucene is searched as MedRAG and the CLEAR code search it (Anserini's SimpleSearcher: BM25 k1 0.9, b 0.4, ties
broken by document id). A bm25s build that clearmed refuses (its RAM estimate above the available memory: 5M
passages on 24 GiB) is reported as refused, not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from clearmed.retrieval.base import EvidenceError
from clearmed.retrieval.bm25_sparse import BM25sRetriever, check_build_fits, directory_size
from clearmed.retrieval.corpus import MEDRAG_MAPPING, read_jsonl, read_preset, shared_data_root
from clearmed.retrieval.medrag_layout import medrag_contents

K = 32
CORPUS = "synth"
PER_FILE = 100_000
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


# --------------------------------------------------------------------------------------------- the corpus


def shared_sentences() -> tuple[list[str], list[str]]:
    """(sentence, title of its document) from OpenStax and MedQuAD, sentences of 4-60 words, deduplicated."""
    seen: dict[str, str] = {}
    for passage in [*read_preset("openstax"), *read_preset("medquad", pathway="local")]:
        for sentence in _SENTENCE_END.split(" ".join(passage.text.split())):
            if 4 <= len(sentence.split()) <= 60:
                seen.setdefault(sentence, passage.title)
    return list(seen), list(seen.values())


def write_corpus(chunks: Path, passages: int, words: int, seed: int = 0) -> dict[str, Any]:
    """Write `passages` recombined snippets as MedRAG chunk files (kept when a previous run wrote the same)."""
    marker = chunks / "corpus.json"
    wanted = {"passages": passages, "words": words, "seed": seed}
    if marker.is_file() and json.loads(marker.read_text())["spec"] == wanted:
        return json.loads(marker.read_text())
    shutil.rmtree(chunks, ignore_errors=True)
    chunks.mkdir(parents=True)
    sentences, titles = shared_sentences()
    lengths = np.array([len(s.split()) for s in sentences])
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    total_words = 0
    for start in range(0, passages, PER_FILE):
        source = f"synth{start // PER_FILE:03d}"
        count = min(PER_FILE, passages - start)
        # Enough draws for the batch: mean sentence length is ~17 words, so 3x the expected need never runs out.
        draws = rng.integers(0, len(sentences), size=count * (3 * words // max(1, int(lengths.mean())) + 4))
        position = 0
        with (chunks / f"{source}.jsonl").open("w", encoding="utf-8") as sink:
            for line in range(count):
                picked: list[int] = []
                size = 0
                while size < words:
                    index = int(draws[position])
                    position += 1
                    picked.append(index)
                    size += int(lengths[index])
                total_words += size
                title = titles[picked[0]]
                content = " ".join(sentences[i] for i in picked)
                row = {"id": f"{source}_{line}", "title": title, "content": content}
                row["contents"] = medrag_contents(title, content)
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
    summary = {
        "spec": wanted,
        "distinct_sentences": len(sentences),
        "mean_words": round(total_words / passages, 1),
        "chunk_bytes": sum(p.stat().st_size for p in chunks.glob("*.jsonl")),
        "write_s": round(time.perf_counter() - started, 1),
    }
    marker.write_text(json.dumps(summary), encoding="utf-8")
    return summary


def chunk_passages(chunks: Path) -> Iterator[Any]:
    for path in sorted(chunks.glob("*.jsonl")):
        yield from read_jsonl(path, MEDRAG_MAPPING, corpus=CORPUS)


def medqa_queries(count: int) -> list[str]:
    path = shared_data_root() / "benchmarks" / "medqa" / "dev.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    np.random.default_rng(0).shuffle(rows)  # type: ignore[arg-type]
    return [row["question"] for row in rows[:count]]


# --------------------------------------------------------------------------------------------- child workers


def worker_bm25s_build(chunks: Path, index: Path) -> dict[str, Any]:
    passages = sum(1 for path in chunks.glob("*.jsonl") for _ in path.open("rb"))
    check_build_fits(passages, name=CORPUS)  # the refusal clearmed's own build path applies
    started = time.perf_counter()
    built = BM25sRetriever.build(chunk_passages(chunks), name=CORPUS, directory=index)
    return {"build_s": round(time.perf_counter() - started, 1), "passages": len(built)}


WARM_UP = 20


def worker_query(engine: str, where: Path, count: int) -> dict[str, Any]:
    # Distinct warm-up queries first: the JVM compiles Lucene's scoring loops over the first dozens of queries.
    stems = medqa_queries(count + WARM_UP)
    warm_up, queries = stems[:WARM_UP], stems[WARM_UP:]
    started = time.perf_counter()
    search: Any
    if engine == "lucene":
        from clearmed.retrieval.lucene import LuceneCorpus

        searcher = LuceneCorpus(where, CORPUS)
        search = searcher.search
    else:
        search = BM25sRetriever.load(where).retrieve
    opened = time.perf_counter() - started
    for query in warm_up:
        search(query, K)
    latencies = []
    for query in queries:
        started = time.perf_counter()
        hits = search(query, K)
        latencies.append((time.perf_counter() - started) * 1000)
        assert hits, f"no hit for {query[:60]!r}"
    ordered = sorted(latencies)
    return {
        "open_s": round(opened, 2),
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
        "queries": len(queries),
    }


def run_measured(command: list[str]) -> tuple[dict[str, Any], float, float, str]:
    """Run a child; (its last JSON line or {}, wall seconds, peak RSS in MB, its output's last lines)."""
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as child:
        output = child.stdout.read().decode("utf-8", errors="replace") if child.stdout else ""
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    lines = [line for line in output.splitlines() if line.strip()]
    result: dict[str, Any] = {}
    if child.returncode == 0 and lines and lines[-1].startswith("{"):
        result = json.loads(lines[-1])
    tail = " | ".join(line for line in lines[-3:] if not line.startswith("WARNING"))
    if child.returncode != 0:
        result = {"error": tail or f"exit {child.returncode}"}
    return result, seconds, usage.ru_maxrss / 1024, tail  # Linux: KiB


def worker_command(*args: str) -> list[str]:
    return [sys.executable, __file__, "--worker", *args]


# --------------------------------------------------------------------------------------------- driver


def bench_size(work: Path, passages: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    db = work / f"n{passages}"
    chunks = db / CORPUS / "chunk"
    corpus = write_corpus(chunks, passages, args.words)
    print(
        f"# {passages:,} passages: {corpus['mean_words']} words each on average, chunk files "
        f"{corpus['chunk_bytes'] / 2**30:.2f} GiB (recombined from {corpus['distinct_sentences']:,} sentences)",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    if "lucene" in args.engines:
        index = db / CORPUS / "index" / "bm25"
        shutil.rmtree(index, ignore_errors=True)
        command = [
            sys.executable, "-m", "clearmed.retrieval.lucene", "--collection", "JsonCollection",
            "--input", str(chunks), "--index", str(index), "--generator", "DefaultLuceneDocumentGenerator",
            "--threads", str(args.threads),
        ]  # fmt: skip
        built, seconds, rss, tail = run_measured(command)
        row: dict[str, Any] = {"engine": "lucene", "passages": passages, "threads": args.threads}
        if "error" in built or not any(index.glob("segments_*")):
            row["error"] = built.get("error") or tail
        else:
            row.update(build_s=round(seconds, 1), build_rss_mb=round(rss), disk_mb=round(directory_size(index) / 2**20))
            queried, _, qrss, _ = run_measured(worker_command("query", "lucene", str(db), str(args.queries)))
            row.update(queried, query_rss_mb=round(qrss))
        rows.append(row)
        print_table(rows[-1:])
    if "bm25s" in args.engines:
        index = db / "bm25s"
        shutil.rmtree(index, ignore_errors=True)
        built, seconds, rss, _ = run_measured(worker_command("bm25s-build", str(chunks), str(index)))
        row = {"engine": "bm25s", "passages": passages, "threads": 1}
        if "error" in built:
            row["error"] = built["error"]
        else:
            row.update(build_s=built["build_s"], build_rss_mb=round(rss), disk_mb=round(directory_size(index) / 2**20))
            queried, _, qrss, _ = run_measured(worker_command("query", "bm25s", str(index), str(args.queries)))
            row.update(queried, query_rss_mb=round(qrss))
        rows.append(row)
        print_table(rows[-1:])
    if not args.keep:
        shutil.rmtree(db, ignore_errors=True)
    return rows


COLUMNS = [
    ("engine", "engine"),
    ("passages", "passages"),
    ("threads", "build threads"),
    ("build_s", "build s"),
    ("build_rss_mb", "build peak RSS MB"),
    ("disk_mb", "index MB"),
    ("open_s", "open s"),
    ("p50_ms", "p50 ms (k=32)"),
    ("p95_ms", "p95 ms"),
    ("query_rss_mb", "query peak RSS MB"),
]


def print_table(rows: list[dict[str, Any]], header: bool = True) -> None:
    if header:
        print("| " + " | ".join(title for _, title in COLUMNS) + " |")
        print("|" + "---|" * len(COLUMNS))
    for row in rows:
        if "error" in row:
            print(f"| {row['engine']} | {row['passages']:,} | {row['error']} |" + " |" * (len(COLUMNS) - 3))
            continue
        cells = [row.get(key) for key, _ in COLUMNS]
        print("| " + " | ".join("-" if c is None else f"{c:,}" if isinstance(c, int) else str(c) for c in cells) + " |")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, action="append", help="corpus size (repeat for several)")
    parser.add_argument("--engines", nargs="+", default=["lucene", "bm25s"], choices=["lucene", "bm25s"])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="Lucene indexing threads")
    parser.add_argument("--words", type=int, default=280, help="minimum words per passage")
    parser.add_argument("--queries", type=int, default=100, help="MedQA question stems timed per engine")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/clearmed-bench-lucene"))
    parser.add_argument("--keep", action="store_true", help="keep the corpora and indexes afterwards")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        kind, *rest = args.worker
        try:
            if kind == "bm25s-build":
                result = worker_bm25s_build(Path(rest[0]), Path(rest[1]))
            else:
                result = worker_query(rest[0], Path(rest[1]), int(rest[2]))
        except EvidenceError as exc:
            print(f"refused: {exc}" if "lucene" in str(exc) else f"error: {exc}")
            return 1
        print(json.dumps(result))
        return 0

    rows: list[dict[str, Any]] = []
    print(f"# {os.cpu_count()} cores; Lucene builds with {args.threads} threads; queries: MedQA stems, k = {K}")
    for passages in args.passages or [100_000]:
        rows.extend(bench_size(args.work_dir, passages, args))
    print("\n# all results")
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
