#!/usr/bin/env bash
# Issue 16 on the shared MMLU-Med pool, embedded model (-c embedded-shared): CLEAR on train ids (to tune the
# calibrated verifier's weights) and on held-out test ids, then Direct, MedRAG-BM25 and clear-heuristic on
# exactly the test ids CLEAR answered, the pooling weights fitted by likelihood (replay, zero LM calls) and the paired
# comparison.
#
# Order matters for cost, not for results: scored passes are cached, so Direct and MedRAG after CLEAR reuse its
# parametric and local passes (their prompts are the pathways'), and clear-heuristic reuses all three.
# Everything resumes: rerun to continue. A step that fails stops the script (a later step would read its missing
# or partial output). TRAIN_N / TEST_N cap the id lists (default: all of them).
set -euo pipefail
cd "$(dirname "$0")/.." && . "${VENV:-.venv}/bin/activate"
R=${RUNS:-$HOME/.cache/clearmed/runs/issue16/mmlu}
mkdir -p "$R"
ids() { grep -v '^#' "docs/splits/mmlu-medical-$1-ids.txt" | head -n "${2:-100000}"; }
ids train "${TRAIN_N:-}" > "$R/train-ids.txt"
ids test "${TEST_N:-}" > "$R/test-ids.txt"
eval_on() {  # program, id file, run folder, extra args
  clearmed eval --program "$1" --benchmark mmlu-medical --source shared -c embedded-shared --ids "$2" \
    --run-dir "$3" "${@:4}" || { echo "FAILED $1 on $2" >&2; return 1; }
}
# A run folder keeps the question list it was created with, so the train run is named by its size: a larger TRAIN_N
# is a new folder, and the questions an earlier, smaller run answered come from the cache.
TRAIN_RUN="$R/clear-train-n$(wc -l < "$R/train-ids.txt" | tr -d ' ')"
eval_on clear "$R/train-ids.txt" "$TRAIN_RUN"
eval_on clear "$R/test-ids.txt" "$R/clear-test"
# the baselines on the test ids CLEAR answered (all of them once its run is complete)
python -c "import json,sys; [print(json.loads(l)['question_id']) for l in open(sys.argv[1])]" "$R/clear-test/results.jsonl" \
  > "$R/test-answered-ids.txt"
for program in direct medrag clear-heuristic; do
  eval_on "$program" "$R/test-answered-ids.txt" "$R/$program-test"
done
# the calibrated verifier's pooling weights fitted by likelihood on the train run (the search for train accuracy the
# run in docs/results.md also made, `calibrated_weights`, was removed: it lost on held-out ids), scored on the
# held-out ids by replay, then the fitted program live on the same test ids (its pathway passes come from the cache)
clearmed tune --run "$TRAIN_RUN" --run "$R/clear-test" --params calibrated_fit --trials 1 \
  --train-ids "$R/train-ids.txt" --test-ids "$R/test-answered-ids.txt" --out "$R/fitted"
eval_on clear "$R/test-answered-ids.txt" "$R/clear-fitted-test" --program-artifact "$R/fitted"
clearmed compare "$R/direct-test" "$R/medrag-test" "$R/clear-test" "$R/clear-fitted-test" "$R/clear-heuristic-test" \
  --common --out "$R/compare"
