"""Benchmark loaders: Hugging Face hub ids or local files in the upstream schema -> `Question`s.

    from clearmed.benchmarks import load_benchmark, available_benchmarks
    bench = load_benchmark("medqa", source="../shared/data/benchmarks/medqa/dev.jsonl", limit=50, seed=0)

`available_benchmarks()` lists every name with its hub id, answer mode and scoring protocol. Each
benchmark lives in its own private module (`_medqa.py`, `_nejm.py`, ...) whose docstring records the upstream
schema and every choice made when mapping it (multi-answer handling, filters, repairs). Your own questions, in
the Python API's format, load as `load_benchmark("questions", source="my.jsonl")` (`_questions.py`).
"""

from clearmed.benchmarks._errors import (
    BenchmarkDataError,
    BenchmarkError,
    BenchmarkSourceError,
    UnknownBenchmarkError,
)
from clearmed.benchmarks._questions import QUESTIONS, QUESTIONS_FORMAT, PlainQuestion, benchmark_folder, plain_question
from clearmed.benchmarks._registry import OnError, available_benchmarks, benchmark_info, load_benchmark
from clearmed.benchmarks._sampling import sample
from clearmed.benchmarks._types import BenchmarkInfo, BenchmarkSet, RowIssue

__all__ = [
    "QUESTIONS",
    "QUESTIONS_FORMAT",
    "BenchmarkDataError",
    "BenchmarkError",
    "BenchmarkInfo",
    "BenchmarkSet",
    "BenchmarkSourceError",
    "OnError",
    "PlainQuestion",
    "RowIssue",
    "UnknownBenchmarkError",
    "available_benchmarks",
    "benchmark_folder",
    "benchmark_info",
    "load_benchmark",
    "plain_question",
    "sample",
]
