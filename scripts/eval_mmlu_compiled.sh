#!/usr/bin/env bash
# Issue 16's "compiled and tuned against uncompiled" check on the shared MMLU-Med pool, embedded model
# (-c embedded-shared). Run scripts/eval_mmlu_med.sh first: this reuses its uncompiled runs and tune artifact.
#
#  1. `clearmed compile` (BootstrapFewShot) opens only the three pathways' answer predictors, on train ids only
#     (the committed test ids are excluded); its val ids are also train ids.
#  2. The compiled program runs on the first TEST_N held-out test ids, then on the compile's train + val ids (its
#     tune records). The demos change every pathway prompt, so these passes are new: about 15 s per question.
#  3. Both programs are tuned the same way on the same train ids, with zero LM calls: the pooling weights fitted by
#     likelihood (TUNE_PARAMS, default calibrated_fit; 80 ids are too few for a 5-number accuracy search), the
#     compiled one on its own records, the uncompiled one on its train run's records of those ids.
#  4. Each tuned program runs live on the test ids (its pathway passes come from the cache), and all are paired.
#
# Everything resumes: rerun to continue. COMPILE_TRAIN / COMPILE_VAL / TEST_N / DEMOS size it.
set -uo pipefail
cd "$(dirname "$0")/.." && . "${VENV:-.venv}/bin/activate"
R=${RUNS:-$HOME/.cache/clearmed/runs/issue16/mmlu}
C="$R/compiled"
mkdir -p "$C"
eval_on() {  # program, id file, run folder, extra args
  clearmed eval --program "$1" --benchmark mmlu-medical --source shared -c embedded-shared --ids "$2" \
    --run-dir "$3" "${@:4}" || { echo "FAILED $1 on $2" >&2; exit 1; }
}
if [ ! -f "$C/program/program.json" ]; then
  clearmed compile --program clear --optimizer bootstrap --benchmark mmlu-medical --source shared -c embedded-shared \
    --train "${COMPILE_TRAIN:-40}" --val "${COMPILE_VAL:-40}" --seed 0 \
    --exclude-ids docs/splits/mmlu-medical-test-ids.txt --max-demos "${DEMOS:-2}" \
    --stages parametric.answer,local.reader.answer,dynamic.reader.answer --out "$C/program" || exit 1
fi
# the compile's train + val ids: the compiled program's tune records
python -c "import json,sys; u=json.load(open(sys.argv[1])); print('\n'.join(u['train'] + u['val']))" \
  "$C/program/ids.json" > "$C/train-ids.txt"
grep -v '^#' docs/splits/mmlu-medical-test-ids.txt | head -n "${TEST_N:-200}" > "$C/test-ids.txt"
# test ids first: compiled against uncompiled pathways, at the same thresholds, is the first reading
eval_on clear "$C/test-ids.txt" "$C/clear-test" --program-artifact "$C/program"
eval_on clear "$C/train-ids.txt" "$C/clear-train" --program-artifact "$C/program" --allow-train-overlap
tune() {  # train run, test run, out, extra args
  clearmed tune --run "$1" --run "$2" --params "${TUNE_PARAMS:-calibrated_fit}" --trials "${TRIALS:-1}" --seed 0 \
    --train-ids "$C/train-ids.txt" --test-ids "$C/test-ids.txt" --out "$3" "${@:4}" || exit 1
}
[ -f "$C/tuned/thresholds.json" ] || tune "$C/clear-train" "$C/clear-test" "$C/tuned" --program-artifact "$C/program"
# the uncompiled program tuned on the same train ids, from its own train run
[ -f "$C/uncompiled-tuned/thresholds.json" ] || tune "$R/clear-train-n245" "$R/clear-test" "$C/uncompiled-tuned"
eval_on clear "$C/test-ids.txt" "$C/clear-tuned-test" --program-artifact "$C/tuned"
eval_on clear "$C/test-ids.txt" "$C/uncompiled-tuned-test" --program-artifact "$C/uncompiled-tuned"
clearmed compare "$R/direct-test" "$R/clear-test" "$C/uncompiled-tuned-test" "$C/clear-test" "$C/clear-tuned-test" \
  --common --out "$C/compare"
