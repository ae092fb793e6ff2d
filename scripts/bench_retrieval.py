"""Benchmark the local retrievers: build time, peak memory, reload time, query latency, backend agreement.

    python scripts/bench_retrieval.py                       # shared corpora + synthetic 1M (about 10 minutes)
    python scripts/bench_retrieval.py --sizes 100000 --rank-sizes 30000 --queries 50    # quicker
    python scripts/bench_retrieval.py --json results.json

Corpora: "shared" is OpenStax + MedQuAD as local passages (~30k, /work/shared/data or $CLEARMED_SHARED_DATA);
"synthetic-N" has N passages of 40-120 words drawn Zipf-wise from the shared corpora's own vocabulary, so
term statistics look like medical text. Queries are MedQA question stems (the question-only convention of the
local pathway), k = 10. Each measurement runs in a fresh subprocess so that peak RSS is its own.
rank_bm25 has no persistence (reload = rebuild) and is only measured up to `--rank-sizes`; above its hard cap
the script shows the refusal.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from clearmed.retrieval.bm25_rank import HARD_CAP, CorpusTooLargeError, RankBM25Retriever
from clearmed.retrieval.bm25_sparse import BM25sRetriever, directory_size
from clearmed.retrieval.corpus_presets import read_preset, shared_data_root
from clearmed.signatures.records import Passage, Provenance

K = 10


# --------------------------------------------------------------------------------------------- data


def shared_passages() -> Iterator[Passage]:
    yield from read_preset("openstax")
    yield from read_preset("medquad", pathway="local")


def medqa_queries(count: int) -> list[str]:
    path = shared_data_root() / "benchmarks" / "medqa" / "dev.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    random.Random(0).shuffle(rows)
    return [row["question"] for row in rows[:count]]


def synthetic_vocabulary(limit: int = 60_000) -> list[str]:
    counts: Counter[str] = Counter()
    for passage in read_preset("openstax"):
        counts.update(word.strip(".,;:()[]\"'").lower() for word in passage.text.split())
    return [word for word, _ in counts.most_common(limit) if word]


def synthetic_passages(size: int, seed: int = 0) -> Iterator[Passage]:
    vocab = np.array(synthetic_vocabulary(), dtype=object)
    rng = np.random.default_rng(seed)
    # Zipf over the real frequency ranks: the head is function words, the tail rare medical terms.
    ranks = np.arange(1, len(vocab) + 1)
    probs = 1.0 / ranks**1.05
    probs /= probs.sum()
    provenance = Provenance(kind="corpus", corpus=f"synthetic-{size}")
    batch = 10_000
    for start in range(0, size, batch):
        n = min(batch, size - start)
        lengths = rng.integers(40, 121, size=n)
        words = vocab[rng.choice(len(vocab), size=int(lengths.sum()), p=probs)]
        offset = 0
        for i, length in enumerate(lengths):
            text = " ".join(words[offset : offset + length])
            offset += length
            doc_id = f"syn{start + i}"
            yield Passage(
                id=doc_id,
                text=text,
                pathway="local",
                provenance=provenance.model_copy(update={"doc_id": doc_id}),
            )


def corpus(name: str) -> Iterator[Passage]:
    if name == "shared":
        return shared_passages()
    if name.startswith("synthetic-"):
        return synthetic_passages(int(name.split("-", 1)[1]))
    raise SystemExit(f"unknown corpus {name!r}")


# --------------------------------------------------------------------------------------------- worker


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def time_queries(retriever: Any, queries: list[str]) -> tuple[list[float], list[list[str]]]:
    retriever.retrieve(queries[0], K)  # warm caches (mmap pages, first-call overheads)
    latencies: list[float] = []
    tops: list[list[str]] = []
    for query in queries:
        started = time.perf_counter()
        hits = retriever.retrieve(query, K)
        latencies.append((time.perf_counter() - started) * 1000)
        tops.append([hit.id for hit in hits])
    return latencies, tops


def summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
        "mean_ms": round(statistics.fmean(ordered), 2),
    }


def worker(backend: str, corpus_name: str, queries: int, index_dir: Path | None, tops_file: Path | None) -> dict:
    query_texts = medqa_queries(queries)
    result: dict[str, Any] = {"backend": backend, "corpus": corpus_name, "queries": len(query_texts)}
    if backend == "rank_bm25":
        passages = corpus(corpus_name)
        started = time.perf_counter()
        try:
            retriever: Any = RankBM25Retriever(passages, name=corpus_name)
        except CorpusTooLargeError as exc:
            return {**result, "refused": str(exc)}
        result["build_s"] = round(time.perf_counter() - started, 2)
        result["reload_s"] = None  # no persistence: every process rebuilds
    else:
        assert index_dir is not None
        started = time.perf_counter()
        built = BM25sRetriever.build(corpus(corpus_name), name=corpus_name, directory=index_dir)
        result["build_s"] = round(time.perf_counter() - started, 2)
        result["disk_mb"] = round(directory_size(index_dir) / 2**20, 1)
        result["build_peak_rss_mb"] = round(peak_rss_mb(), 0)
        built.close()
        del built
        started = time.perf_counter()
        retriever = BM25sRetriever.load(index_dir, mmap=True)
        result["reload_s"] = round(time.perf_counter() - started, 3)
    result["passages"] = len(retriever)
    latencies, tops = time_queries(retriever, query_texts)
    result.update(summary(latencies))
    result["peak_rss_mb"] = round(peak_rss_mb(), 0)
    if tops_file is not None:
        tops_file.write_text(json.dumps(tops), encoding="utf-8")
    return result


def reload_only(index_dir: Path, queries: int) -> dict:
    """A fresh process opening an existing index: the reload time a CLI run or eval worker pays."""
    started = time.perf_counter()
    retriever = BM25sRetriever.load(index_dir, mmap=True)
    reload_s = time.perf_counter() - started
    latencies, _ = time_queries(retriever, medqa_queries(queries))
    return {
        "reload_s": round(reload_s, 3),
        **summary(latencies),
        "peak_rss_mb": round(peak_rss_mb(), 0),
        "passages": len(retriever),
    }


# --------------------------------------------------------------------------------------------- driver


def run_child(*args: str) -> dict:
    command = [sys.executable, __file__, "--worker", *args]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        return {"error": completed.stderr.strip().splitlines()[-1] if completed.stderr else "failed"}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def overlap(a_file: Path, b_file: Path) -> float:
    a = json.loads(a_file.read_text())
    b = json.loads(b_file.read_text())
    scores = [len(set(x) & set(y)) / K for x, y in zip(a, b, strict=True) if x or y]
    return round(statistics.fmean(scores), 3) if scores else float("nan")


def print_table(rows: list[dict]) -> None:
    columns = [
        ("backend", "backend"),
        ("corpus", "corpus"),
        ("passages", "passages"),
        ("build_s", "build s"),
        ("peak_rss_mb", "peak MB"),
        ("disk_mb", "disk MB"),
        ("reload_s", "reload s"),
        ("p50_ms", "p50 ms"),
        ("p95_ms", "p95 ms"),
    ]
    print(" | ".join(title for _, title in columns))
    for row in rows:
        if "refused" in row or "error" in row:
            print(f"{row['backend']} | {row['corpus']} | {row.get('refused') or row.get('error')}")
            continue
        print(
            " | ".join(
                "-" if row.get(key) is None else f"{row[key]:,}" if isinstance(row[key], int) else str(row[key])
                for key, _ in columns
            )
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000", help="synthetic corpus sizes for bm25s (comma list)")
    parser.add_argument("--rank-sizes", default="30000,100000", help="synthetic sizes for rank_bm25")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rank-queries", type=int, default=30, help="queries for rank_bm25 (it is slow)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        kind = args.worker[0]
        if kind == "reload":
            print(json.dumps(reload_only(Path(args.worker[1]), int(args.worker[2]))))
        else:
            backend, corpus_name, queries, index_dir, tops = args.worker
            print(
                json.dumps(
                    worker(
                        backend,
                        corpus_name,
                        int(queries),
                        Path(index_dir) if index_dir != "-" else None,
                        Path(tops) if tops != "-" else None,
                    )
                )
            )
        return 0

    work = Path(tempfile.mkdtemp(prefix="clearmed-bench-"))
    rows: list[dict] = []
    extra: dict[str, Any] = {"machine": f"{os.cpu_count()} cpu", "k": K, "rank_bm25_hard_cap": HARD_CAP}
    try:
        print(f"# shared corpora (openstax + medquad), {args.queries} MedQA queries", flush=True)
        rows.append(run_child("bm25s", "shared", str(args.queries), str(work / "shared"), str(work / "s.json")))
        rows.append(run_child("rank_bm25", "shared", str(args.queries), "-", str(work / "r.json")))
        extra["shared_top10_overlap"] = overlap(work / "s.json", work / "r.json")
        rows.append(
            {
                "backend": "bm25s (reload)",
                "corpus": "shared",
                **run_child("reload", str(work / "shared"), str(args.queries)),
            }
        )
        print_table(rows[-3:])
        print(f"mean top-{K} overlap rank_bm25 vs bm25s on shared: {extra['shared_top10_overlap']}", flush=True)
        for size in [int(s) for s in args.rank_sizes.split(",") if s]:
            name = f"synthetic-{size}"
            print(f"# rank_bm25 on {name}", flush=True)
            rows.append(run_child("rank_bm25", name, str(args.rank_queries), "-", "-"))
            print_table(rows[-1:])
        for size in [int(s) for s in args.sizes.split(",") if s]:
            name = f"synthetic-{size}"
            print(f"# bm25s on {name}", flush=True)
            rows.append(run_child("bm25s", name, str(args.queries), str(work / name), "-"))
            rows.append(
                {
                    "backend": "bm25s (reload)",
                    "corpus": name,
                    **run_child("reload", str(work / name), str(args.queries)),
                }
            )
            print_table(rows[-2:])
            if size > HARD_CAP:
                print(f"# rank_bm25 on {name}: checking the refusal", flush=True)
                try:
                    RankBM25Retriever(synthetic_passages(HARD_CAP + 1), name=name)
                    rows.append({"backend": "rank_bm25", "corpus": name, "error": "did not refuse"})
                except CorpusTooLargeError as exc:
                    rows.append({"backend": "rank_bm25", "corpus": name, "refused": str(exc)})
                print_table(rows[-1:])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n# all results")
    print_table(rows)
    for key, value in extra.items():
        print(f"{key}: {value}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, **extra}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
