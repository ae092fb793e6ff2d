#!/usr/bin/env bash
# CLEAR over MIRAGE's recorded GPT-3.5 / GPT-4 pathways (docs/results.md, issues 34 and 46), one cell per call:
#   docs/experiments/eval_mirage_recorded.sh medqa gpt-4-32k
#   docs/experiments/eval_mirage_recorded.sh mmlu gpt-35-turbo-16k
# Direct, MedRAG and the deterministic verifier call no LM and take seconds: their headroom report (both scoring
# conventions) is printed before the LM verifier starts. The LM verifier runs the embedded backbone on the
# questions where the recorded pathways disagree (a question with one usable answer needs no verifier call).
# ANSWER_SOURCE=verifier keeps the LM verifier's own letter (the CLEAR code's) in a run folder of its own.
# Every run resumes.
set -euo pipefail
bench=${1:?benchmark: medqa or mmlu}; model=${2:?model: gpt-4-32k or gpt-35-turbo-16k}
P=../shared/data/mirage/prediction/$bench
C=$P/cot/OpenAI/$model; R=$P/rag_32/OpenAI/$model/medcorp/RRF-4
X=docs/experiments/mirage-verifier.toml
out=runs/mirage/$bench-$model
common=(--benchmark "mirage-$bench" --source shared -c "$X")
pathways=(--pathway parametric="$C" --pathway local="$R" --pathway dynamic=absent)
clearmed eval --program direct "${common[@]}" --pathway parametric="$C" --run-dir "$out-direct"
clearmed eval --program medrag "${common[@]}" --pathway local="$R" --run-dir "$out-medrag"
clearmed eval --program clear-heuristic "${common[@]}" "${pathways[@]}" --run-dir "$out-heuristic"
python docs/experiments/recorded_headroom.py "$out-heuristic" "$out-direct" "$out-medrag"
lm=lm; extra=()
if [[ ${ANSWER_SOURCE:-route} == verifier ]]; then lm=lm-letter; extra=(--set program.answer_source=verifier); fi
clearmed eval --program clear "${common[@]}" "${pathways[@]}" "${extra[@]}" --run-dir "$out-$lm"
python docs/experiments/recorded_headroom.py "$out-$lm" "$out-direct" "$out-medrag"
