"""clearmed.backbones: the LMs the program runs on. Import a name from its module; this package re-exports
nothing, so reading a config imports neither DSPy nor llama.cpp.

- config: `config` (`BackboneConfig`, `parse_backbone`), `errors` (`ConfigError`), `pricing`, `provider_options`
  (what a remote backbone's ``extra`` may hold), `openai_reasoning` (OpenAI's reasoning models and their limits);
- building: `factory` (`build_lm`), `client` (`ClearmedLM`: the one DSPy LM every backbone goes through), and what it
  relies on: `fatal_errors` (the LM errors that stop a run), `endpoint_cache` (DSPy's cache keyed by endpoint),
  `native_sockets` (DSPy's pooled connections marked for an attempt's deadline);
- the embedded model: `embedded` (the llama.cpp engine), `llama_runtime`, `model_files` (the packaged GGUF),
  `engine_build` (the portable build), `selfcheck`;
- what a backbone answers beside text: `logprobs` (next-token log-probabilities for scored answers),
  `token_count`, `context_window`, `reasoning` (thinking kept in the trail);
- failures: `failures` (one classification of LM errors), `retry_wait` (the wait a server asks for). Their own HTTP
  requests go through `clearmed.core.http`;
- the providers' batch APIs: `batch_api` (lines, limits, states, results, and which backbones have one),
  `batch_openai` (OpenAI's Files and Batch client), `batch_anthropic` (Anthropic's Message Batches client),
  `batch_calls` (a batch run's LM calls answered from its batches, or deferred to the next).
"""
