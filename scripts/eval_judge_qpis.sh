#!/usr/bin/env bash
# Issue 6: CLEAR with and without the option-wise judge, and with and without QPIS, on the same 40 shared MedQA
# questions (seed 0) on the embedded default. Resumable: rerun to continue. Then one comparison table.
cd "$(dirname "$0")/.." && . "${VENV:-.venv}/bin/activate"
R=${RUNS:-$HOME/.cache/clearmed/runs/issue6}
for program in clear clear-judge clear-qpis clear-judge-qpis; do
  clearmed eval --program $program --benchmark medqa --source shared --limit ${LIMIT:-40} --seed 0 -c embedded-shared \
    --run-dir $R/medqa/$program-n${LIMIT:-40}-s0 || echo "FAILED $program"
done
clearmed compare $R/medqa/*-n${LIMIT:-40}-s0 --out $R/compare-medqa
