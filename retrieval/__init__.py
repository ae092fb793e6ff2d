"""clearmed.retrieval: the evidence the local and dynamic pathways read. Import a name from its module; this
package re-exports nothing, so reading a config imports none of the search clients, bm25s or numpy.

- interfaces: `base` (`Retriever`, `WebSearch`, `EvidenceError`), `hits` (top k, provenance of a hit);
- corpora: `corpus` (`read_jsonl`, `read_parquet`, `read_hub`, `FieldMapping`, `Chunking`), `corpus_presets`
  (the shared corpora by name, `read_preset`, `shared_data_root`), `tokenize`, `medrag_layout` (MedRAG's corpus
  folders);
- local retrieval: `bm25_sparse` (`BM25sRetriever`, the default; `build_memory`: the RAM a build needs), `bm25_rank`
  (`RankBM25Retriever`, the reference), `lucene` (pyserini, sharded: `lucene` searches, `lucene_index` builds and
  reads the index folders, `lucene_java` finds Java and starts the JVM), `dense` (MedCPT), `merge` (several
  corpora as one), wrapped by `hit_cache` (`CachedRetriever`: hits recorded once, replayed with no index opened)
  keyed by `index_identity`;
- web search: `tavily` (`TavilySearch`), `offline_web` (`OfflineWebSearch`), `memory` (in-memory doubles), wrapped
  by `cache` (`CachedWebSearch`, SQLite record/replay); `query` (`build_query`);
- the evidence screen (`screening`, which folds look-alike letters first; its text patterns in `screen_patterns`)
  and source quality: a domain's authority tier (`domain_tiers`), the priors (`priors`: `QualityPriors`,
  `assess_with_priors`) and the CLEAR code's domain table (`clear_code_quality`);
- config and factory: `config` (`CorpusConfig`, `SearchConfig`), `factory` (`build_retriever`,
  `build_web_search`, `build_index`).
"""
