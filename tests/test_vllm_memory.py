"""planner/engines/vllm/pool.py reproduces vLLM's own KV-pool arithmetic on the worked cases.

Goldens: tests/golden/engines/vllm_cases.json, written by docs/engines/worked_cases.py (stdlib, no planner
imports) from vLLM 0.27.1 (commit 6e448d0ea) and vllm-ascend 182b75ea, cited per case in the golden's
"citation" list and step by step in docs/engines/vllm-memory.md. The model geometry comes from kvplan's
catalogue here, not from the worked-case script, so the test also checks that the cards carry the
geometry vLLM reads. Tolerance: integers exact; concurrency to 1e-9 relative (a float division).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner import catalog, memory
from planner.dtypes import StorageDType, weight_scheme
from planner.engines.vllm import pool as vm
from planner.engines.vllm import startup
from planner.engines.vllm.versions import VERSIONS

GOLDEN = Path(__file__).parent / "golden" / "engines" / "vllm_cases.json"
CASES: list[dict[str, Any]] = json.loads(GOLDEN.read_text())["cases"]
PLATFORM = {"cuda": "cuda", "ascend": "ascend", "ascend-pr14543": "ascend-pr14543"}
# The engine release whose start-up rule each golden platform's worked case follows.
ENGINE_VERSION = {"cuda": "vllm-cuda", "ascend": "vllm-ascend-main"}
INT_FIELDS = (
    "block_size_tokens",
    "page_bytes",
    "layers_per_group",
    "num_blocks",
    "blocks_per_request",
    "kv_cache_size_tokens",
)


def pool_for(case: dict[str, Any]) -> vm.VllmPool:
    """The pool kvplan computes for a golden case's inputs."""
    inputs = case["inputs"]
    settings = vm.PoolSettings(
        platform=PLATFORM[case["engine"]],  # type: ignore[arg-type]
        kv_dtype=StorageDType(inputs["kv_dtype"]),
        conv_dtype=StorageDType.bf16,
        tp=inputs["tp"],
        max_model_len_tokens=inputs["ctx_tokens"],
        prefix_caching=inputs.get("prefix_caching", False),
        num_spec=inputs.get("num_speculative_tokens", 0),
    )
    return vm.vllm_pool(
        catalog.load_model(inputs["model"]), settings=settings, available_bytes=inputs["available_kv_bytes"]
    )


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_pool_matches_golden(case: dict[str, Any]) -> None:
    pool = pool_for(case)
    expected = case["expected"]
    for name in INT_FIELDS:
        assert getattr(pool, name) == expected[name], name
    for name in ("attention_groups", "state_groups", "mamba_cache_mode"):
        if name in expected:
            assert getattr(pool, name) == expected[name], name
    assert pool.max_concurrency == pytest.approx(expected["max_concurrency"], rel=1e-9)


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c["issue_figure"] is not None and c["expected"]["matches_issue_figure"]],
    ids=lambda c: c["id"],
)
def test_log_line_prints_issue_figure(case: dict[str, Any]) -> None:
    """The "Maximum concurrency" line shows the figure issue 12 quotes, to the digits it quotes."""
    line = vm.log_lines(pool_for(case))[1]
    digits = 2 if case["issue_figure"] in (71.0, 78.02) else 1
    assert f"{float(line.rsplit(' ', 1)[1].rstrip('x')):.{digits}f}" == f"{case['issue_figure']:.{digits}f}"


def kvplan_non_kv(model: str, card: str, dtype: str, tp: int, tokens: int) -> tuple[int, int, int, int]:
    """(capacity, weights, activation at `tokens`, runtime) per rank from kvplan's memory model."""
    mc, hw = catalog.load_model(model), catalog.load_card(card)
    act_dtype = StorageDType(hw.activation_dtype)
    weights = memory.weight_bytes_per_device(
        mc, scheme=weight_scheme(dtype), activation_dtype=act_dtype, tp=tp
    )
    activation = memory.activation_bytes_per_device(
        mc, max_prefill_tokens=tokens, activation_dtype=act_dtype, tp=tp
    )
    capacity_gib, runtime_gib = CASE_CARD_GIB[card]
    return capacity_gib * 2**30, weights, activation, int(runtime_gib * 2**30)


# Card profiles before issue 28 (950PR 128 GiB, now ascend-950pr-128g; 910B3 64 GiB nominal), 3 GiB reserve:
# the (device total, reserve) GiB the issue-12 worked cases were computed with.
CASE_CARD_GIB = {"ascend-950pr": (128, 3.0), "ascend-910b3": (64, 3.0)}


UTIL_CASES = [c for c in CASES if "util092" in c["id"]]


@pytest.mark.parametrize("case", UTIL_CASES, ids=lambda c: c["id"])
def test_vllm_default_budget_from_kvplan_terms(case: dict[str, Any]) -> None:
    """available = requested(0.92 x capacity) - weights - act(8192) - runtime, every term from kvplan's model;
    requested rounded as the engine rounds it (ceil on CUDA, floor on vllm-ascend), through the one
    implementation the plans read (startup.startup_terms -> startup.requested_bytes)."""
    inputs = case["inputs"]
    cap, weights, act, runtime = kvplan_non_kv(
        inputs["model"], inputs["card"], inputs["weights_dtype"], inputs["tp"], 8192
    )
    profile = startup.ProfileRun(
        device_total_bytes=cap,
        gpu_memory_utilization=vm.DEFAULT_GPU_MEMORY_UTILIZATION,
        weights_bytes=weights,
        activation_bytes=act,
        non_torch_bytes=runtime,
    )
    got = startup.startup_terms(VERSIONS[ENGINE_VERSION[case["engine"]]], profile=profile)
    assert got.available_kv_bytes == inputs["available_kv_bytes"]
    want = case["expected"].get("min_gpu_memory_utilization_for_78_seqs")
    if want is not None:
        util = vm.min_gpu_memory_utilization(
            capacity_bytes=cap, non_kv_bytes=weights + act + runtime, n_seqs=78, pool=pool_for(case)
        )
        assert want <= util < want + 0.01


def test_group_size_rule() -> None:
    """min count, unless max < 1.5 x min (then max): 16/48 -> 16, 17/48 -> 17, 12/15 -> 15."""
    assert [vm.group_size(c) for c in ([16, 48], [17, 48], [12, 15], [10, 15])] == [16, 17, 15, 10]


def test_platform_of_vendor() -> None:
    assert vm.platform_for("nvidia") == "cuda"
    assert vm.platform_for("huawei") == "ascend"
    assert vm.platform_for("huawei", ascend_page_fix=True) == "ascend-pr14543"


def test_pool_that_holds_nothing() -> None:
    """A negative or too-small budget gives 0 blocks and 0.00x, never a negative count."""
    case = CASES[0]
    inputs = {**case["inputs"], "available_kv_bytes": -1}
    assert pool_for({**case, "inputs": inputs}).num_blocks == 0
