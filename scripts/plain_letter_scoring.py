"""The plain option-letter scoring baseline of issue 16, on the same questions as a run.

Plain scoring: the question and its options in one user turn with a one-line instruction after them, then the
next-token probability of each letter; with `--rag`, four BM25 passages of 120 words (query: the question and
the options' texts) placed before the question. Each CLEAR pathway, scored from its own DSPy prompt, must at
least match this on the same questions: the script prints both, paired, when given a run folder.

    python scripts/plain_letter_scoring.py --run RUN_DIR [--rag] [-c embedded-shared] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from clearmed.backbones import build_lm
from clearmed.config import load_config
from clearmed.evaluation import read_records
from clearmed.metrics import mcnemar_exact_p
from clearmed.programs import format_options
from clearmed.retrieval.factory import build_retriever

INSTRUCTION = "Answer with the letter of the correct option only."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a run folder: its questions, and its pathways to pair with")
    parser.add_argument("--rag", action="store_true", help="four BM25 passages before the question")
    parser.add_argument("-c", "--config", default="embedded-shared")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--out", help="JSONL of per-question distributions")
    args = parser.parse_args()
    config = load_config(args.config)
    engine = build_lm(config.backbones["main"]).engine
    retriever = build_retriever(config.corpus) if args.rag and config.corpus is not None else None
    records = list(read_records(Path(args.run)))[: args.limit]
    pathway = "local" if args.rag else "parametric"
    plain_right: list[bool] = []
    pathway_right: list[bool] = []
    seconds = 0.0
    rows: list[str] = []
    for record in records:
        question = record.decision.bundle.question
        context = ""
        if retriever is not None:
            query = " ".join([question.text, *(question.options or {}).values()])
            passages = retriever.retrieve(query, 4)
            context = "Context:\n" + "\n\n".join(" ".join(p.text.split()[:120]) for p in passages) + "\n\n"
        prompt = f"{context}Question: {question.text}\n{format_options(question)}\n{INSTRUCTION}"
        started = time.perf_counter()
        scores = engine.score_next_token([{"role": "user", "content": prompt}], "", list(question.options or {}))
        seconds += time.perf_counter() - started
        dist = scores.distribution()
        plain_right.append(max(dist, key=dist.__getitem__) in question.gold_letters)
        answer = record.decision.bundle.candidate(pathway).answer
        pathway_right.append(answer is not None and list(answer.letters) == sorted(question.gold_letters))
        rows.append(json.dumps({"id": question.id, "plain": dist, "mass": scores.mass}))
    if args.out:
        Path(args.out).write_text("".join(row + "\n" for row in rows), encoding="utf-8")
    n = len(records)
    only_plain = sum(p and not q for p, q in zip(plain_right, pathway_right, strict=True))
    only_pathway = sum(q and not p for p, q in zip(plain_right, pathway_right, strict=True))
    print(f"{n} questions; plain {'RAG ' if args.rag else ''}letter scoring {100 * sum(plain_right) / n:.1f}% "
          f"({seconds / n:.1f} s/q); the run's {pathway} pathway {100 * sum(pathway_right) / n:.1f}%; "
          f"only plain right {only_plain}, only the pathway right {only_pathway}, "
          f"McNemar p = {mcnemar_exact_p(only_plain, only_pathway):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
