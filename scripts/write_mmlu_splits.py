"""Write the committed MMLU-Med train/test id files (`docs/splits/mmlu-medical-{train,test}-ids.txt`).

The pool is the shared MMLU-Med file (545 questions). `optimize.splits.seeded_split` shuffles it with seed 0,
makes the first 245 positions train and the rest test, and drops every question that repeats one earlier in
that order (same normalised stem and options: MMLU asks some questions in both clinical_knowledge and
college_medicine). So every id that is not a repeat stays where the first split (commit 5c54243, before the
check) put it, a repeat across the cut keeps its train copy, and no test question repeats a train question.
Each file's header lists the repeats dropped from its side.

    python scripts/write_mmlu_splits.py            # rewrite the files
    python scripts/write_mmlu_splits.py --check    # exit 1 if the committed files differ
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clearmed.benchmarks import benchmark_info, load_benchmark
from clearmed.optimize.splits import SeededSplit, seeded_split
from clearmed.retrieval.corpus_presets import shared_data_root

BENCHMARK = "mmlu-medical"
N_TRAIN = 245
SEED = 0
SPLITS = Path(__file__).resolve().parents[1] / "docs" / "splits"
RULE = (
    "# Seeded shuffle of the pool (seed {seed}): the first {n_train} positions are train, the rest test. A question\n"
    "# that repeats one earlier in that order (same normalised stem and options) is dropped, so no test question\n"
    "# repeats a train question and no question counts twice. Written by scripts/write_mmlu_splits.py.\n"
)
TITLE = {
    "train": "# MMLU-Med shared pool ({n_pool} questions): {n} tuning/compile ids.\n",
    "test": "# MMLU-Med shared pool ({n_pool} questions): {n} held-out test ids; never tuned on.\n",
}


def pool_file() -> Path:
    shared_file = benchmark_info(BENCHMARK).shared_file
    assert shared_file is not None
    return shared_data_root() / "benchmarks" / shared_file


def split_of(pool: Path) -> tuple[int, SeededSplit]:
    questions = load_benchmark(BENCHMARK, source=pool).questions
    return len(questions), seeded_split(questions, n_train=N_TRAIN, seed=SEED)


def file_texts(n_pool: int, split: SeededSplit) -> dict[str, str]:
    """The text of each id file: title, rule, the repeats dropped from that side, then one id per line."""
    texts = {}
    for side, ids, repeats in (("train", split.train, split.train_repeats), ("test", split.test, split.test_repeats)):
        dropped = [
            f"#   {copy} repeats {kept} ({'train' if kept in split.train else 'test'})\n"
            for copy, kept in repeats.items()
        ]
        header = TITLE[side].format(n_pool=n_pool, n=len(ids)) + RULE.format(seed=SEED, n_train=N_TRAIN)
        if dropped:
            header += f"# Dropped from this side as repeats ({len(dropped)}):\n" + "".join(dropped)
        texts[side] = header + "".join(f"{qid}\n" for qid in ids)
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=Path, help="the MMLU-Med pool file (default: the shared copy)")
    parser.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = parser.parse_args(argv)
    pool = args.pool or pool_file()
    if not pool.is_file():
        print(f"error: {pool}: no MMLU-Med pool file", file=sys.stderr)
        return 2
    texts = file_texts(*split_of(pool))
    stale = []
    for side, text in texts.items():
        path = SPLITS / f"{BENCHMARK}-{side}-ids.txt"
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"out of date: {', '.join(stale)}; run scripts/write_mmlu_splits.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
