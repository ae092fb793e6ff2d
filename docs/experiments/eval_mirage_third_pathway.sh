#!/usr/bin/env bash
# A third pathway over MIRAGE's recorded MMLU-Med GPT-4 pathways (docs/results.md, "A third pathway", issue 34):
# the offline dynamic pathway (the embedded backbone over the shared MedQuAD pages) is run once into clearmed run
# folders, then read back with --pathway dynamic=RUN beside the recorded CoT and MedRAG replies. Run after
# `docs/experiments/eval_mirage_recorded.sh mmlu gpt-4-32k` (its two-pathway runs are the baseline).
# Cost on 2 cores: about 30 s a dynamic call. The disputed file holds both models' disputed questions, GPT-4's 70
# first (35 min) and GPT-3.5's 138 new ones after (70 min more): the measurement in docs/results.md stopped that run
# after GPT-4's with Ctrl-C, and running it again resumes. The 50 agreed questions: 25 min, and the audits 10 min.
set -euo pipefail
P=../shared/data/mirage/prediction/mmlu; model=gpt-4-32k
C=$P/cot/OpenAI/$model; R=$P/rag_32/OpenAI/$model/medcorp/RRF-4
X=docs/experiments/mirage-verifier.toml
out=runs/mirage/mmlu-$model
common=(--benchmark mirage-mmlu --source shared -c "$X")
mkdir -p runs/mirage
python docs/experiments/disputed_ids.py mmlu gpt-4-32k gpt-35-turbo-16k > runs/mirage/mmlu-disputed.txt
python docs/experiments/disputed_ids.py mmlu gpt-4-32k > runs/mirage/mmlu-gpt-4-disputed.txt
python docs/experiments/disputed_ids.py mmlu gpt-4-32k --agreed 50 > runs/mirage/mmlu-gpt-4-agreed-50.txt
clearmed eval --program online "${common[@]}" --ids runs/mirage/mmlu-disputed.txt --run-dir runs/mirage/mmlu-online-disputed
clearmed eval --program online "${common[@]}" --ids runs/mirage/mmlu-gpt-4-agreed-50.txt \
  --run-dir runs/mirage/mmlu-online-gpt-4-agreed-50
for set in disputed agreed-50; do
  online=runs/mirage/mmlu-online-disputed
  [ "$set" = disputed ] || online=runs/mirage/mmlu-online-gpt-4-agreed-50
  clearmed eval --program clear-heuristic "${common[@]}" --pathway parametric="$C" --pathway local="$R" \
    --pathway dynamic="$online" --ids "runs/mirage/mmlu-gpt-4-$set.txt" --run-dir "$out-heuristic3-$set"
  python docs/experiments/recorded_headroom.py "$out-heuristic3-$set" "$out-direct" "$out-medrag"
done
clearmed compare "$out-heuristic" "$out-heuristic3-disputed" "$out-heuristic3-agreed-50"
