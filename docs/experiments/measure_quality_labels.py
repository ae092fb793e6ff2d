"""Measure a backbone's source-quality labels against the domain/content priors on the shared web pages.

For N shared MedQA questions (or any benchmark), search the config's web backend as the dynamic pathway does,
label the results once with the LM assessment (`source_quality = "lm"`) and once from the priors alone, and
print how often they agree, the confusion table, and the LM's labels per domain tier. The shared pages are
NIH (MedQuAD) pages: a government health agency, so "high" by the tiers; an LM that calls them "low" is worse
than the priors for that backbone, and its config should set `source_quality = "priors"`.

    python docs/experiments/measure_quality_labels.py -c embedded-shared --benchmark medqa --limit 25
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from clearmed.api.assemble import build_clear
from clearmed.api.questions import shared_source
from clearmed.benchmarks import load_benchmark
from clearmed.config import load_config
from clearmed.programs.lm.context import RunContext, activate
from clearmed.programs.pathways.web_query import build_query
from clearmed.retrieval.priors import prior_assessment, prior_features


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", default="embedded-shared")
    parser.add_argument("--benchmark", default="medqa")
    parser.add_argument("--limit", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = load_config(args.config)
    program = build_clear(config)
    priors = config.quality_priors
    bench = load_benchmark(args.benchmark, source=shared_source(args.benchmark), limit=args.limit, seed=args.seed)
    settings = program.settings.model_copy(update={"source_quality": "lm"})
    pairs: list[tuple[str, str, str]] = []  # (tier, lm label, prior label)
    seconds = 0.0
    for question in bench.questions:
        passages = program.dynamic.search.value.search(build_query(question), settings.dynamic_k)
        passages = [p.model_copy(update={"id": f"W{i + 1}"}) for i, p in enumerate(passages)]
        context = RunContext(settings=settings, role_lms=program.role_lms)
        started = time.perf_counter()
        with activate(context):
            assessed = program.quality(question_text=question.text, passages=passages)
        seconds += time.perf_counter() - started
        by_id = {a.passage_id: a for a in assessed.quality.assessments}
        for passage in passages:
            lm_label = by_id[passage.id].label if assessed.quality.origin == "llm" else "unlabelled"
            prior = prior_assessment(passage, priors).label
            tier = prior_features(passage).split(";")[0]
            pairs.append((tier, lm_label, prior))
    agree = sum(lm == prior for _, lm, prior in pairs)
    print(
        f"{len(pairs)} pages from {len(bench.questions)} questions; LM assessment {seconds / len(bench.questions):.1f} s per call"
    )
    print(f"LM label = prior label on {agree}/{len(pairs)} ({100 * agree / max(1, len(pairs)):.1f}%)")
    print("confusion (LM label -> prior label):")
    for (lm, prior), count in sorted(Counter((lm, prior) for _, lm, prior in pairs).items()):
        print(f"  {lm:>10} -> {prior:<6} {count}")
    print("LM labels by domain:")
    for tier, counts in sorted({t: Counter(lm for tt, lm, _ in pairs if tt == t) for t, _, _ in pairs}.items()):
        print(f"  {tier}: {dict(counts)}")


if __name__ == "__main__":
    main()
