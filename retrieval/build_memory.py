"""How much memory a bm25s build needs, and the one-line refusal of a build the machine cannot hold.

`BM25sRetriever.build` holds every passage's token ids until bm25s has scored them all, so a corpus past the
available memory is refused up front (`check_build_fits`, from the row count) or as the stream passes the limit
(`max_build_passages`), naming the Lucene backend, which indexes on disk.
"""

from __future__ import annotations

from clearmed.retrieval.base import EvidenceError

# Peak resident memory of a build, per passage: every passage's token-id list is held until bm25s has scored
# them all (a Python list: 8 bytes a token plus its header), then bm25s' own arrays and their intermediates.
# Measured through this build path (`scripts/bench_lucene.py --engines bm25s`, a child process's peak RSS) on
# passages of ~180 tokens (290 words of the shared corpora's sentences recombined): 454 MiB at 50,000 passages,
# 1,210 MiB at 150,000, so 7.9 KB a passage at the margin. The estimate is for MedRAG-sized snippets; shorter
# passages cost less (4.4 KB at ~105 tokens). PubMed's 23.9M snippets: ~180 GiB; MedCorp's 54.2M: ~400 GiB.
BUILD_BYTES_PER_PASSAGE = 8_000
# What the same measurement leaves at zero passages (the interpreter, numpy, bm25s), rounded up.
BUILD_BASE_BYTES = 100 * 2**20


def available_memory() -> int | None:
    """Bytes the kernel says a new allocation can take without swapping (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def build_memory_estimate(passages: int) -> int:
    return BUILD_BASE_BYTES + passages * BUILD_BYTES_PER_PASSAGE


def max_build_passages() -> int | None:
    """How many passages a bm25s build can hold in the memory available now (None: unknown, no limit)."""
    available = available_memory()
    if available is None:
        return None
    return max(0, (available - BUILD_BASE_BYTES) // BUILD_BYTES_PER_PASSAGE)


def check_build_fits(passages: int, *, name: str) -> None:
    """Refuse, in one line, a bm25s build whose estimated peak memory exceeds the available memory."""
    limit = max_build_passages()
    if limit is not None and passages > limit:
        raise EvidenceError(too_large_message(passages, name), kind="index", backend="bm25s")


def too_large_message(passages: int, name: str, *, at_least: bool = False) -> str:
    gib = build_memory_estimate(passages) / 2**30
    available = (available_memory() or 0) / 2**30
    count = f"{'more than ' if at_least else ''}{passages:,}"
    return (
        f"corpus {name!r}: a bm25s build of {count} passages needs about {gib:.1f} GiB of RAM "
        f"({BUILD_BYTES_PER_PASSAGE:,} bytes a passage) but {available:.1f} GiB is available; use the Lucene "
        'backend (corpus.backend = "lucene", README "MedCorp"), which indexes on disk, or set corpus.force = true'
    )
