#!/usr/bin/env bash
# Issue 16's "compiled and tuned against uncompiled" check on the shared MMLU-Med pool, embedded model
# (-c embedded-shared). Run the suite docs/experiments/mmlu-med-suite.toml first (SUITE: its folder): this reuses
# its uncompiled train and test runs.
#
#  1. `clearmed compile` (BootstrapFewShot) opens only the three pathways' answer predictors, on train ids only
#     (the committed test ids are excluded); its val ids are also train ids.
#  2. The compiled program runs on the first TEST_N held-out test ids (the demos change every pathway prompt, so
#     these passes are new: about 23 s per question here), then on the compile's val ids (its tune records; the
#     compile scored them already, so they come from the cache).
#  3. Both programs are tuned the same way on those val ids, with zero LM calls: the pooling weights fitted by
#     likelihood (TUNE_PARAMS, default calibrated_fit; 20 ids are far too few for an accuracy search), the compiled
#     one on its own records, the uncompiled one on its train run's records of the same ids.
#  4. Each tuned program runs live on the test ids (its pathway passes come from the cache), and all are paired.
#  5. Not run here (new passes, about 20 to 30 s per question): the compiled and tuned artifact's no-harm check,
#       ARTIFACT=~/.cache/clearmed/runs/issue16/mmlu/compiled/compiled-fitted-val \
#       RUNS=~/.cache/clearmed/runs/issue16/compiled/BENCH \
#         scripts/eval_no_harm.sh BENCH 200          # BENCH: pubmedqa-noctx, medqa
#
# Everything resumes: rerun to continue. COMPILE_TRAIN / COMPILE_VAL / TEST_N / DEMOS size it.
set -uo pipefail
cd "$(dirname "$0")/../.." && . "${VENV:-.venv}/bin/activate"
R=${RUNS:-$HOME/.cache/clearmed/runs/issue16/mmlu}
C="$R/compiled"
S="${SUITE:-runs/suites/mmlu-med}/embedded-shared"
mkdir -p "$C"
eval_on() {  # program, id file, run folder, extra args
  clearmed eval --program "$1" --benchmark mmlu-medical --source shared -c embedded-shared --ids "$2" \
    --run-dir "$3" "${@:4}" || { echo "FAILED $1 on $2" >&2; exit 1; }
}
if [ ! -f "$C/program/program.json" ]; then
  clearmed compile --program clear --optimizer bootstrap --benchmark mmlu-medical --source shared -c embedded-shared \
    --train "${COMPILE_TRAIN:-20}" --val "${COMPILE_VAL:-20}" --seed 0 \
    --exclude-ids docs/splits/mmlu-medical-test-ids.txt --max-demos "${DEMOS:-2}" \
    --stages parametric.answer,local.reader.answer,dynamic.reader.answer --out "$C/program" || exit 1
fi
python -c "import json,sys; print('\n'.join(json.load(open(sys.argv[1]))['val']))" "$C/program/ids.json" \
  > "$C/val-ids.txt"
grep -v '^#' docs/splits/mmlu-medical-test-ids.txt | head -n "${TEST_N:-200}" > "$C/test-ids.txt"
eval_on clear "$C/test-ids.txt" "$C/clear-test" --program-artifact "$C/program"
eval_on clear "$C/val-ids.txt" "$C/clear-val" --program-artifact "$C/program" --allow-train-overlap
tune() {  # out, runs and extra args
  [ -f "$1/thresholds.json" ] || clearmed tune "${@:2}" --params "${TUNE_PARAMS:-calibrated_fit}" --trials "${TRIALS:-1}" \
    --seed 0 --train-ids "$C/val-ids.txt" --test-ids "$C/test-ids.txt" --out "$1" || exit 1
}
tune "$C/compiled-fitted-val" --run "$C/clear-val" --run "$C/clear-test" --program-artifact "$C/program"
tune "$C/uncompiled-fitted-val" --run "$S/mmlu-medical-train/clear-all-s0" --run "$S/mmlu-medical-test/clear-all-s0"
# each tuned program live on the test ids (their pathway passes come from the cache), all paired
eval_on clear "$C/test-ids.txt" "$C/uncompiled-fitted-val-test" --program-artifact "$C/uncompiled-fitted-val"
eval_on clear "$C/test-ids.txt" "$C/compiled-fitted-val-test" --program-artifact "$C/compiled-fitted-val"
clearmed compare "$S/mmlu-medical-test/direct-all-s0" "$S/mmlu-medical-test/clear-all-s0" "$C/uncompiled-fitted-val-test" "$C/clear-test" \
  "$C/compiled-fitted-val-test" --common --out "$C/compare"
