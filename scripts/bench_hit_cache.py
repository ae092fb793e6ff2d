"""The local pathway's retrieval per question: a live Lucene search against a replay from the warmed hit cache.

    python scripts/bench_hit_cache.py                              # OpenStax, 200 MedQA questions, k 16 (~1 minute)
    python scripts/bench_hit_cache.py --questions 500 --k 32 --work /tmp/hc --keep --json hits.json

The index: the shared OpenStax corpus (14k passages) written in MedRAG's layout and indexed by `clearmed`'s Lucene
build into `--work` (a scratch folder; with `--keep` an index already there is reused). The questions: the first
`--questions` of the shared MedQA dev file, each searched with the query the local pathway searches
(`build_query`), at k = `--k` (the paper's local_k, 16). The cache is warmed as `clearmed index warm` warms it.

Live and replay each run in a fresh process, through `build_retriever` as a run builds its retriever: the start
(live: the JVM started and every index opened; replay: the cache file opened, no index read) and each question's
`retrieve` wall time after `--warmup` questions searched first (JIT, page cache). The replay also says whether
pyjnius was imported (it must not be: no JVM).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from clearmed.retrieval.config import CorpusConfig
from clearmed.retrieval.corpus_presets import shared_data_root


def corpus_config(work: Path, mode: str) -> CorpusConfig:
    hit_cache = {"hit_cache": work / "hits.sqlite", "hit_cache_mode": mode} if mode != "off" else {}
    return CorpusConfig(backend="lucene", db_dir=work / "db", preset="openstax", threads=2, **hit_cache)  # type: ignore[arg-type]


def queries(count: int) -> list[str]:
    from clearmed.benchmarks import load_benchmark
    from clearmed.programs.pathways.web_query import build_query  # the query LocalPathway searches

    bench = load_benchmark("medqa", source=shared_data_root() / "benchmarks" / "medqa" / "dev.jsonl")
    return [build_query(question) for question in bench.questions[:count]]


def child(mode: str, work: Path, count: int, k: int, warmup: int) -> dict[str, Any]:
    """In a fresh process: the retriever's start, then each question's retrieval wall time."""
    from clearmed.retrieval.factory import build_retriever

    asked = queries(count + warmup)
    started = time.perf_counter()
    retriever = build_retriever(corpus_config(work, mode))
    start_seconds = time.perf_counter() - started
    for query in asked[:warmup]:
        retriever.retrieve(query, k)
    times = []
    for query in asked[warmup:]:
        began = time.perf_counter()
        retriever.retrieve(query, k)
        times.append(time.perf_counter() - began)
    times.sort()
    return {
        "mode": mode,
        "start_s": round(start_seconds, 3),
        "questions": len(times),
        "mean_ms": round(1000 * statistics.fmean(times), 3),
        "p50_ms": round(1000 * times[len(times) // 2], 3),
        "p95_ms": round(1000 * times[int(len(times) * 0.95)], 3),
        "jnius_imported": "jnius" in sys.modules,
    }


def warm(work: Path, count: int, k: int, warmup: int) -> float:
    """Fill the cache with every question (the warm-up ones too), as `clearmed index warm` does; its seconds."""
    from clearmed.retrieval.factory import build_hit_cache

    started = time.perf_counter()
    cache = build_hit_cache(corpus_config(work, "record"))
    for query in queries(count + warmup):
        cache.retrieve(query, k)
    cache.close()
    return time.perf_counter() - started


def run_child(mode: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", mode, "--work", str(work)]
    command += ["--questions", str(args.questions), "--k", str(args.k), "--warmup", str(args.warmup)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {mode} child failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one, removed after)")
    parser.add_argument("--keep", action="store_true", help="keep --work, and reuse the index built there")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", choices=["off", "replay"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-hit-cache-"))
    if args.child:
        print(json.dumps(child(args.child, work, args.questions, args.k, args.warmup)))
        return 0
    try:
        (work / "hits.sqlite").unlink(missing_ok=True)
        from clearmed.retrieval.factory import build_lucene_indexes

        started = time.perf_counter()
        build_lucene_indexes(corpus_config(work, "off"))
        built = time.perf_counter() - started
        warmed = warm(work, args.questions, args.k, args.warmup)
        results = {"index_build_s": round(built, 1), "warm_s": round(warmed, 1)}
        results |= {"live": run_child("off", args, work), "replay": run_child("replay", args, work)}
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    live, replay = results["live"], results["replay"]
    print(
        f"OpenStax on Lucene, {live['questions']} MedQA questions, k={args.k} (index build {built:.1f} s, warm {warmed:.1f} s)"
    )
    for row in (live, replay):
        print(
            f"  {row['mode'] if row['mode'] == 'replay' else 'live':>6}: start {row['start_s']:.2f} s, per question "
            f"mean {row['mean_ms']:.2f} ms, p50 {row['p50_ms']:.2f} ms, p95 {row['p95_ms']:.2f} ms, "
            f"pyjnius imported: {row['jnius_imported']}"
        )
    print(f"  replay is {live['mean_ms'] / replay['mean_ms']:.0f}x faster a question (mean)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
