"""The ids of the MIRAGE questions whose recorded CoT and MedRAG replies disagree or one is unparseable, or a
seeded sample of those where they agree, for `clearmed eval --ids` (docs/results.md, "A third pathway"):

    python docs/experiments/disputed_ids.py mmlu gpt-4-32k gpt-35-turbo-16k > runs/mirage/mmlu-disputed.txt
    python docs/experiments/disputed_ids.py mmlu gpt-4-32k --agreed 50 > runs/mirage/mmlu-gpt-4-agreed-50.txt

With several models, the first model's ids come first, then each next model's new ones, so a run over the file
that is stopped early still covers whole models. The two sets behave differently once a third pathway is added:
on a disputed question the deterministic verifier may now side with whichever recorded answer the third one
shares; on an agreed one it keeps the pair's consensus, and only the challenge audit (an LM call) can overturn it
when the third answer differs. The ids are chosen from the recorded replies alone, never from the gold answers."""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from clearmed.api.questions import shared_source
from clearmed.benchmarks import load_benchmark
from clearmed.recorded import read_recorded_pathway
from clearmed.signatures.records import Question


def disputed(prediction: Path, model: str, questions: list[Question]) -> list[str]:
    cot = read_recorded_pathway(prediction / "cot" / "OpenAI" / model, "parametric", questions)
    rag = read_recorded_pathway(prediction / "rag_32" / "OpenAI" / model / "medcorp" / "RRF-4", "local", questions)
    ids = []
    for question in questions:
        a, b = cot.replies[question.id], rag.replies[question.id]
        if not (a.status == b.status == "ok" and a.letters == b.letters):
            ids.append(question.id)
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("subset", choices=["mmlu", "medqa"])
    parser.add_argument("models", nargs="+", help="MIRAGE's model folders, e.g. gpt-4-32k gpt-35-turbo-16k")
    parser.add_argument("--agreed", type=int, metavar="N", help="instead: N questions where every model's pair agrees")
    parser.add_argument("--seed", type=int, default=0, help="the --agreed sample's seed (default 0)")
    args = parser.parse_args(argv)
    benchmark = f"mirage-{args.subset}"
    source = shared_source(benchmark)
    questions = load_benchmark(benchmark, source=source).questions
    prediction = source.parent / "prediction" / args.subset
    chosen: list[str] = []
    for model in args.models:
        seen = set(chosen)
        chosen += [qid for qid in disputed(prediction, model, questions) if qid not in seen]
    if args.agreed is not None:
        taken = set(chosen)
        agreed = [question.id for question in questions if question.id not in taken]
        chosen = random.Random(args.seed).sample(agreed, min(args.agreed, len(agreed)))
    sys.stdout.write("".join(f"{qid}\n" for qid in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
