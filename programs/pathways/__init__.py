"""The three pathways (CLEAR 2.2): parametric (the model's knowledge), local (a curated corpus) and dynamic (the
web), in `pathways.py`; beside them their evidence search and the targeted follow-up search (`evidence_search`),
the scored answer step (`scored_answer`), the web query (`web_query`), query-planned search (`qpis`), recorded
pathways (`recorded`) and the task adapters (`task_adapters`: format gate, response)."""
