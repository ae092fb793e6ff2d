#!/usr/bin/env bash
# Issue 16's "never below Direct by more than 1 pp" check: CLEAR with the MMLU-Med tuned artifact (the best
# configuration found there, -c embedded-shared) on a seeded sample of another benchmark, then Direct on exactly
# the questions CLEAR answered (its passes come from the scoring cache), paired.
#
#   scripts/eval_no_harm.sh pubmedqa-noctx [N=200]      # PubMedQA question only (MIRAGE's PubMedQA*)
#   scripts/eval_no_harm.sh medqa [N=200]
#
# ARTIFACT (default: the tune artifact of issue 16's MMLU-Med runs, docs/experiments/mmlu-med-suite.toml's tune
# step) and RUNS choose the folders; reruns resume.
# The likelihood-fitted artifact:  ARTIFACT=~/.cache/clearmed/runs/issue16/mmlu/fitted \
#   RUNS=~/.cache/clearmed/runs/issue16/fitted/medqa scripts/eval_no_harm.sh medqa
set -uo pipefail
cd "$(dirname "$0")/.." && . "${VENV:-.venv}/bin/activate"
benchmark=${1:?benchmark name}
n=${2:-200}
R=${RUNS:-$HOME/.cache/clearmed/runs/issue16/$benchmark}
A=${ARTIFACT:-$HOME/.cache/clearmed/runs/issue16/mmlu/tuned}
mkdir -p "$R"
clearmed eval --program clear --benchmark "$benchmark" --source shared -c embedded-shared --limit "$n" --seed 0 \
  --program-artifact "$A" --run-dir "$R/clear-n$n" || exit 1
python -c "import json,sys; [print(json.loads(l)['question_id']) for l in open(sys.argv[1])]" "$R/clear-n$n/results.jsonl" \
  > "$R/answered-ids.txt"
clearmed eval --program direct --benchmark "$benchmark" --source shared -c embedded-shared --ids "$R/answered-ids.txt" \
  --run-dir "$R/direct-n$n" || exit 1
clearmed compare "$R/direct-n$n" "$R/clear-n$n" --common --out "$R/compare-n$n"
