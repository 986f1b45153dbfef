"""Shared test builders."""

from __future__ import annotations

from planner import catalog
from planner.deployment import Deployment
from planner.dtypes import StorageDType


def deployment_950pr(model_id: str = "qwen3.5-27b", *, scheme: str = "fp8", **kw: object) -> Deployment:
    """An uncalibrated ascend-950pr deployment at ctx 4096, tp 1, bf16 KV; `kw` overrides any field."""
    fields: dict[str, object] = {
        "weight_scheme_name": scheme,
        "kv_dtype": StorageDType.bf16,
        "tp": 1,
        "ctx_tokens": 4096,
        "calibrated": False,
    }
    fields.update(kw)
    return Deployment(
        model=catalog.load_model(model_id), hardware=catalog.load_card("ascend-950pr"), **fields
    )


# `kvplan mindie` for Qwen3-32B on four 910B3 at 8k (the documented tp=4 example); tests append their flags.
MINDIE_32B_TP4_ARGS = ("mindie", "--model", "qwen3-32b", "--card", "ascend-910b3", "--tp", "4", "--ctx", "8k")
