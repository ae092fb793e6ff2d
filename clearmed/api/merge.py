"""`MergeRequest`: the options of `clearmed merge`, the shards of a run joined into one run folder by
`clearmed.api.suite.merge_shards(request.runs, request.out)`."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict


class MergeRequest(BaseModel):
    """One field per `clearmed merge` option of the same name."""

    model_config = ConfigDict(extra="forbid")

    runs: list[str | Path]  # the run folders of all N shards (`clearmed eval ... --shard K/N`)
    out: str | Path  # the merged run's folder (new, or an earlier merge of them)
