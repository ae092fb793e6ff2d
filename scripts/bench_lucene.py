"""Lucene (Anserini through pyserini's indexer) against bm25s on one corpus of N passages in MedRAG's layout.

    python scripts/bench_lucene.py --passages 50000 --engines lucene --shards 2 --threads 2   # ~2 minutes
    python scripts/bench_lucene.py --passages 1000000 --passages 5000000 --engines lucene --shards 2 --threads 2 \
        --keep --json lucene.json
    python scripts/bench_lucene.py --passages 50000 --passages 150000 --engines bm25s   # bm25s' RAM per passage

The corpus: the shared corpora's real sentences recombined. Every OpenStax and MedQuAD text is split at sentence
ends (". ", "? ", "! "); sentences of 4 to 60 words are kept (213k distinct sentences). A passage draws sentences
uniformly with replacement (numpy, seed 0) until it has at least `--words` words (default 280, 291 on average
with the last sentence, which clearmed's tokenizer turns into about 180 tokens: 0.62 a word, stopwords dropped),
takes the title of its first sentence's document, and is written as one MedRAG snippet (id `<file>_<line>`,
title, content, contents) into `<work>/n<N>/synth/chunk/synthNNN.jsonl`, N/16 a file (at most 100,000). The vocabulary is
therefore the shared corpora's, far smaller than PubMed's: a real corpus has a larger term dictionary.

For each engine: build time (Lucene: `clearmed`'s build, `--build-threads` indexing threads, `--shards` shards,
the chunk files' line offsets included; bm25s single-threaded as clearmed runs it), peak RSS of the build (its
own child process, `os.wait4`'s rusage), index size on disk (bm25s' folder holds its copy of the texts; Lucene's
holds none: it reads the chunk files). With `--keep`, a Lucene index already built with the same shards is
reused (its build columns are then empty), so a second run only queries.

Query latency: `--queries` MedQA question stems at k = 32, in a fresh process after 20 other stems as warm-up
(JIT, page cache), searched as clearmed searches (Anserini's analyzer, bag-of-words query, BM25 k1 0.9 b 0.4,
sorted by score then id, Anserini's tie rounding) on a pool of 1 search thread and on one of `--threads`, in
the same process: each stem is run on both, alternating which goes first. Per pool: p50/p95 of wall time and of
the process's CPU time per query (every thread, the JVM's included: parallel slices cost some CPU in all), the
speedup (1-thread p50 wall over the P-thread one), the index's segments and the slices Lucene searches in
parallel, and the stems' mean Σdf/N (the postings scored per document, which sets the cost), with that of the
five demo questions `clearmed doctor` reports for a real index. A bm25s build that
clearmed refuses (its RAM estimate above the available memory: 5M passages on 24 GiB) is reported as refused.
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
from clearmed.retrieval.bm25_sparse import BM25sRetriever, directory_size
from clearmed.retrieval.build_memory import check_build_fits
from clearmed.retrieval.corpus import MEDRAG_MAPPING, read_jsonl
from clearmed.retrieval.corpus_presets import read_preset, shared_data_root
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


def write_corpus(chunks: Path, passages: int, words: int, seed: int = 0, per_file: int = PER_FILE) -> dict[str, Any]:
    """Write `passages` recombined snippets as MedRAG chunk files of `per_file` lines (kept when a previous run
    wrote the same)."""
    marker = chunks / "corpus.json"
    wanted = {"passages": passages, "words": words, "seed": seed, "per_file": per_file}
    if marker.is_file() and json.loads(marker.read_text())["spec"] == wanted:
        return json.loads(marker.read_text())
    shutil.rmtree(chunks, ignore_errors=True)
    chunks.mkdir(parents=True)
    sentences, titles = shared_sentences()
    lengths = np.array([len(s.split()) for s in sentences])
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    total_words = 0
    for start in range(0, passages, per_file):
        source = f"synth{start // per_file:03d}"
        count = min(per_file, passages - start)
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


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 1)


def worker_lucene_build(chunks: Path, index: Path, threads: int, shards: int | None) -> dict[str, Any]:
    from clearmed.retrieval.lucene_index import build_index

    built = build_index(chunks, index, corpus=CORPUS, threads=threads, shards=shards)
    return {"build_s": built.seconds, "documents": built.documents, "shards": built.shards}


def worker_lucene_query(db: Path, count: int, threads: int) -> dict[str, Any]:
    """Latency and CPU per query on a pool of 1 search thread and on one of `threads`, in this one process."""
    from clearmed.api.index_info import density_questions
    from clearmed.retrieval.lucene import LuceneCorpus, SearchPool

    stems = medqa_queries(count + WARM_UP)
    warm_up, queries = stems[:WARM_UP], stems[WARM_UP:]
    started = time.perf_counter()
    sizes = sorted({1, threads})
    corpora = {size: LuceneCorpus(db, CORPUS, pool=SearchPool(size)) for size in sizes}
    opened = time.perf_counter() - started
    for corpus in corpora.values():
        for query in warm_up:
            corpus.search(query, K)
    wall: dict[int, list[float]] = {size: [] for size in sizes}
    cpu: dict[int, list[float]] = {size: [] for size in sizes}
    for number, query in enumerate(queries):
        for size in sizes if number % 2 == 0 else sizes[::-1]:  # alternate which pool meets the query first
            began, began_cpu = time.perf_counter(), time.process_time()
            hits = corpora[size].search(query, K)
            wall[size].append((time.perf_counter() - began) * 1000)
            cpu[size].append((time.process_time() - began_cpu) * 1000)
            assert hits, f"no hit for {query[:60]!r}"
    one = corpora[sizes[0]]
    segments, slices = one.slices()
    result: dict[str, Any] = {
        "open_s": round(opened, 2),
        "queries": len(queries),
        "shards": one.shards,
        "segments": segments,
        "slices": slices,
        "density": round(one.density(queries), 3),
        # The same five demo questions `clearmed doctor` measures a real index with: the two are comparable.
        "demo_density": round(one.density(density_questions()), 3),
        "pools": [
            {
                "search_threads": size,
                "p50_ms": percentile(wall[size], 0.5),
                "p95_ms": percentile(wall[size], 0.95),
                "cpu_p50_ms": percentile(cpu[size], 0.5),
                "cpu_p95_ms": percentile(cpu[size], 0.95),
            }
            for size in sizes
        ],
    }
    result["speedup"] = round(statistics.median(wall[1]) / statistics.median(wall[sizes[-1]]), 2)
    return result


def worker_bm25s_query(index: Path, count: int) -> dict[str, Any]:
    stems = medqa_queries(count + WARM_UP)
    warm_up, queries = stems[:WARM_UP], stems[WARM_UP:]
    started = time.perf_counter()
    search = BM25sRetriever.load(index).retrieve
    opened = time.perf_counter() - started
    for query in warm_up:
        search(query, K)
    latencies = []
    for query in queries:
        began = time.perf_counter()
        hits = search(query, K)
        latencies.append((time.perf_counter() - began) * 1000)
        assert hits, f"no hit for {query[:60]!r}"
    return {
        "open_s": round(opened, 2),
        "p50_ms": percentile(latencies, 0.5),
        "p95_ms": percentile(latencies, 0.95),
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
    # At least 16 chunk files (PubMed's hold about 20k snippets each), so that shards get whole files to split.
    corpus = write_corpus(chunks, passages, args.words, per_file=min(PER_FILE, -(-passages // 16)))
    print(
        f"# {passages:,} passages: {corpus['mean_words']} words each on average, chunk files "
        f"{corpus['chunk_bytes'] / 2**30:.2f} GiB (recombined from {corpus['distinct_sentences']:,} sentences)",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    if "lucene" in args.engines:
        from clearmed.retrieval.lucene_index import index_state, read_build

        index = db / CORPUS / "index" / "bm25"
        built_before = read_build(index)
        reuse = (
            args.keep
            and index_state(index)[0] == "complete"
            and built_before is not None
            and (args.shards is None or built_before.shards == args.shards)
        )
        row: dict[str, Any] = {"engine": "lucene", "passages": passages, "threads": args.build_threads}
        if not reuse:
            shutil.rmtree(index, ignore_errors=True)
            shards = [] if args.shards is None else [str(args.shards)]
            command = worker_command("lucene-build", str(chunks), str(index), str(args.build_threads), *shards)
            built, _, rss, tail = run_measured(command)
            if "error" in built:
                row["error"] = built["error"] or tail
            else:
                row.update(build_s=built["build_s"], build_rss_mb=round(rss))
        if "error" not in row:
            row["disk_mb"] = round(directory_size(index) / 2**20)
            command = worker_command("lucene-query", str(db), str(args.queries), str(args.threads))
            queried, _, qrss, _ = run_measured(command)
            row.update(queried, query_rss_mb=round(qrss))
        rows.append(row)
        print_table(rows[-1:])
    if "bm25s" in args.engines:
        index = db / "bm25s"
        shutil.rmtree(index, ignore_errors=True)
        built, _, rss, _ = run_measured(worker_command("bm25s-build", str(chunks), str(index)))
        row = {"engine": "bm25s", "passages": passages, "threads": 1}
        if "error" in built:
            row["error"] = built["error"]
        else:
            row.update(build_s=built["build_s"], build_rss_mb=round(rss), disk_mb=round(directory_size(index) / 2**20))
            queried, _, qrss, _ = run_measured(worker_command("bm25s-query", str(index), str(args.queries)))
            row.update(queried, query_rss_mb=round(qrss))
        rows.append(row)
        print_table(rows[-1:])
    if not args.keep:
        shutil.rmtree(db, ignore_errors=True)
    return rows


COLUMNS = [
    ("engine", "engine"),
    ("passages", "passages"),
    ("shards", "shards"),
    ("threads", "build threads"),
    ("build_s", "build s"),
    ("build_rss_mb", "build peak RSS MB"),
    ("disk_mb", "index MB"),
    ("open_s", "open s"),
    ("search_threads", "search threads"),
    ("p50_ms", "p50 ms (k=32)"),
    ("p95_ms", "p95 ms"),
    ("cpu_p50_ms", "CPU p50 ms"),
    ("cpu_p95_ms", "CPU p95 ms"),
    ("speedup", "speedup 1->P"),
    ("slices", "segments / slices"),
    ("density", "mean Σdf/N"),
    ("demo_density", "demo Σdf/N"),
    ("query_rss_mb", "query peak RSS MB"),
]


def table_rows(row: dict[str, Any]) -> list[dict[str, Any]]:
    """One line per search pool (bm25s and failures: one line)."""
    if "pools" not in row:
        return [row]
    lines = []
    for pool in row["pools"]:
        line = {key: value for key, value in row.items() if key != "pools"} | pool
        line["slices"] = f"{row['segments']} / {row['slices']}"
        if pool["search_threads"] == 1:
            line.pop("speedup", None)
        lines.append(line)
    return lines


def print_table(rows: list[dict[str, Any]], header: bool = True) -> None:
    if header:
        print("| " + " | ".join(title for _, title in COLUMNS) + " |")
        print("|" + "---|" * len(COLUMNS))
    for line in [line for row in rows for line in table_rows(row)]:
        if "error" in line:
            print(f"| {line['engine']} | {line['passages']:,} | {line['error']} |" + " |" * (len(COLUMNS) - 3))
            continue
        cells = [line.get(key) for key, _ in COLUMNS]
        print("| " + " | ".join("-" if c is None else f"{c:,}" if isinstance(c, int) else str(c) for c in cells) + " |")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, action="append", help="corpus size (repeat for several)")
    parser.add_argument("--engines", nargs="+", default=["lucene", "bm25s"], choices=["lucene", "bm25s"])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="Lucene search threads (and 1)")
    parser.add_argument("--shards", type=int, help="Lucene index shards (default: clearmed's, by size and cores)")
    parser.add_argument("--build-threads", type=int, default=os.cpu_count() or 1, help="Lucene indexing threads")
    parser.add_argument("--words", type=int, default=280, help="minimum words per passage")
    parser.add_argument("--queries", type=int, default=100, help="MedQA question stems timed per engine")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/clearmed-bench-lucene"))
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) the corpora and indexes")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        kind, *rest = args.worker
        try:
            if kind == "bm25s-build":
                result = worker_bm25s_build(Path(rest[0]), Path(rest[1]))
            elif kind == "bm25s-query":
                result = worker_bm25s_query(Path(rest[0]), int(rest[1]))
            elif kind == "lucene-build":
                shards = int(rest[3]) if len(rest) > 3 else None
                result = worker_lucene_build(Path(rest[0]), Path(rest[1]), int(rest[2]), shards)
            else:
                result = worker_lucene_query(Path(rest[0]), int(rest[1]), int(rest[2]))
        except EvidenceError as exc:  # bm25s refuses a build its RAM estimate does not fit
            print(f"refused: {exc}" if kind == "bm25s-build" and "lucene" in str(exc) else f"error: {exc}")
            return 1
        print(json.dumps(result))
        return 0

    rows: list[dict[str, Any]] = []
    print(
        f"# {os.cpu_count()} cores; Lucene builds with {args.build_threads} threads, searches on 1 and "
        f"{args.threads}; queries: MedQA stems, k = {K}"
    )
    for passages in args.passages or [100_000]:
        rows.extend(bench_size(args.work_dir, passages, args))
    print("\n# all results")
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
