"""Runs through the providers' batch APIs (`clearmed eval --batch`): a whole benchmark at half price, in passes, resumable
after a kill (the harness each pass runs is clearmed.evaluation's; the wire to the providers is
clearmed.backbones.batch_api's):

- `run`: `run_batched`, the passes (every unfinished question up to its next LM call that misses the cache, the calls
  that missed sent as provider batches, waited for and collected, then the next pass), `batch_clients` (which roles are
  batched, and the one line that refuses a backbone without a batch API);
- `store`: the run folder's record of its batches (`batches.jsonl`) and of each line's outcome
  (`batch_results.jsonl`), which a rerun reattaches to.

It draws nothing (an import-linter contract: no matplotlib, Jinja2 or report/).
"""
