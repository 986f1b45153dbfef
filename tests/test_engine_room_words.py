"""What the plan and `kvplan serve` print in each engine's own terms (planner/engines/registry.py): the memory
fraction's name, the KV layers MTP adds, and the running-sequence cap the analytic estimate and the
simulation share."""

from __future__ import annotations

import json

import pytest

from planner import capacity, catalog, inputs, memory
from planner.dtypes import StorageDType
from planner.engines import registry
from planner.kinds import ENGINES
from tests.helpers import kvplan

# The name each engine gives the share of device memory it may use.
FRACTION_NAMES = {
    "mindie": "NPU_MEMORY_FRACTION",  # an environment variable, mindie_llm/utils/env.py
    "vllm": "--gpu-memory-utilization",  # CacheConfig.gpu_memory_utilization, vllm/config/cache.py:68
    "sglang": "--mem-fraction-static",  # ServerArgs.mem_fraction_static, sglang server_args.py
    "transformers": "--memory-fraction",  # no engine setting: kvplan's own flag
}


def test_every_engine_names_its_memory_fraction() -> None:
    assert {engine: registry.memory_fraction_name(engine) for engine in ENGINES} == FRACTION_NAMES


@pytest.mark.parametrize("engine", ENGINES)
def test_the_plan_table_labels_the_fraction_in_the_engines_words(engine: str) -> None:
    output = kvplan("-m qwen3-8b --card ascend-910b3 --engine", engine).output
    capacity_row = next(line for line in output.splitlines() if "device capacity" in line)
    assert f" {FRACTION_NAMES[engine]} = " in capacity_row
    others = set(FRACTION_NAMES.values()) - {FRACTION_NAMES[engine]}
    assert not any(name in capacity_row for name in others)


def test_mtp_adds_one_cached_layer_as_mindies_allocator_does() -> None:
    # MindIE-LLM mindie_llm/text_generator/utils/kvcache_settings.py:119-120 @8b4871ad:
    # num_layers += num_speculative_tokens >= 1 (one layer, whatever the draft count).
    # Qwen3.5-27B: 16 full-attention layers (48 GDN), 4 KV heads of 256, bf16:
    #   off: 2 * 16 * 4 * 256 * 16 / 8 = 65_536 B;  on: 2 * 17 * 4 * 256 * 16 / 8 = 69_632 B
    card = catalog.load_model("qwen3.5-27b")
    assert memory.kv_cached_layers(card) == 16
    assert memory.kv_cached_layers(card, mtp=True) == 17
    bf16 = StorageDType.bf16
    assert memory.kv_cache_bytes_per_token(card, kv_dtype=bf16, tp=1) == 65_536
    assert memory.kv_cache_bytes_per_token(card, kv_dtype=bf16, tp=1, mtp=True) == 69_632


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        # 69_632 B = 68.00 KiB over 16 + 1 layers (above)
        ("-m qwen3.5-27b --mtp 1", "KV cache per token: 68.00 KiB (17 cached layers, incl. 1 MTP layer)"),
        ("-m qwen3.5-27b", "KV cache per token: 64.00 KiB (16 cached layers)"),
        # DeepSeek-V3 MLA, bf16 latent 512 + rope 64: (61 + 1) * 576 * 2 = 71_424 B = 69.75 KiB
        (
            "-m deepseek-v3 --tp 16 --mtp 1",
            "KV cache per token: 69.75 KiB (62 cached layers, incl. 1 MTP layer)",
        ),
    ],
)
def test_the_printed_layer_count_is_the_one_the_bytes_count(flags: str, line: str) -> None:
    assert line in kvplan(flags).output


def test_serve_estimate_runs_under_the_cap_the_simulation_uses() -> None:
    # vllm-ascend gets vLLM's SMALL_DEFAULTS (max_num_seqs 256, [VA] 182b75ea platform.py:206-213,
    # planner/engines/vllm/scheduler.py default_limits). Qwen3-8B on a 910B3 at 128 + 128 tokens holds more
    # than 256 sequences at full length, so 400 users run 256 and queue 144, analytic and simulated alike.
    result = kvplan(
        "serve -m qwen3-8b --card ascend-910b3 --engine vllm --concurrency 400 --input-tokens 128 "
        "--output-tokens 128 --json"
    )
    served = json.loads(result.output)
    assert served["admission"]["full_length_batch"] > 256
    assert served["simulated"]["scheduler"]["max_batch"] == 256
    assert served["estimate"]["running_batch"] == 256
    assert served["admission"] == served["admission"] | {"running": 256, "engine_cap": 256, "queued": 144}


def test_the_serving_fits_admission_reads_the_same_default_cap() -> None:
    # planner/fit/prepared.py replica_run passes a row's max_num_seqs, None when the row leaves it out: the
    # engine then runs its default, 256 on vllm-ascend, as `kvplan serve` and the simulator do.
    request = inputs.PlanRequest(model="qwen3-8b", card="ascend-910b3", engine="vllm", ctx="256")
    dep = inputs.to_deployment(request)
    admitted = capacity.admission(dep, clients=1000, engine_cap=None)
    assert (admitted.engine_cap, admitted.running, admitted.queued) == (256, 256, 744)
    assert capacity.admission(dep, clients=1000, engine_cap=300).running == 300
