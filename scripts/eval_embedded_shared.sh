#!/usr/bin/env bash
# Direct, MedRAG-BM25 and CLEAR on the same 50 MedQA and 50 PubMedQA (question-only) shared questions (resumable: rerun to continue). Run folders live outside the work tree.
cd "$(dirname "$0")/.." && . "${VENV:-.venv}/bin/activate"
R=${RUNS:-$HOME/.cache/clearmed/runs/issue5}
for program in direct medrag clear; do
  for bench in medqa pubmedqa-noctx; do
    clearmed eval --program $program --benchmark $bench --source shared --limit 50 --seed 0 -c embedded-shared \
      --run-dir $R/$bench/$program-n50-s0 || echo "FAILED $program $bench"
  done
done
