#!/usr/bin/env bash
# CLEAR over MIRAGE's recorded GPT-3.5 / GPT-4 pathways (docs/results.md, issue 34), one cell per call:
#   docs/experiments/eval_mirage_recorded.sh medqa gpt-4-32k
#   docs/experiments/eval_mirage_recorded.sh mmlu gpt-35-turbo-16k
# Direct, MedRAG and the deterministic verifier call no LM; the LM verifier runs the embedded backbone on the
# questions where the recorded pathways disagree or one is unparseable. Every run resumes.
set -euo pipefail
bench=${1:?benchmark: medqa or mmlu}; model=${2:?model: gpt-4-32k or gpt-35-turbo-16k}
P=../shared/data/mirage/prediction/$bench
C=$P/cot/OpenAI/$model; R=$P/rag_32/OpenAI/$model/medcorp/RRF-4
X=docs/experiments/mirage-verifier.toml
out=runs/mirage/$bench-$model
common=(--benchmark "mirage-$bench" --source shared -c "$X")
clearmed eval --program direct "${common[@]}" --pathway parametric="$C" --run-dir "$out-direct"
clearmed eval --program medrag "${common[@]}" --pathway local="$R" --run-dir "$out-medrag"
clearmed eval --program clear-heuristic "${common[@]}" --pathway parametric="$C" --pathway local="$R" \
  --pathway dynamic=absent --run-dir "$out-heuristic"
clearmed eval --program clear "${common[@]}" --pathway parametric="$C" --pathway local="$R" \
  --pathway dynamic=absent --run-dir "$out-lm"
for v in heuristic lm; do
  python docs/experiments/recorded_headroom.py "$out-$v" "$out-direct" "$out-medrag"
done
