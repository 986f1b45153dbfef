"""vLLM / vllm-ascend release ranges and the start-up rules that differ between them (startup.py applies
them): the KV-pool formula, the hybrid pool's platform, how the logged KV tokens are counted, the default
gpu_memory_utilization, what counts as non-torch memory, the MoE communicators and the rotary caches; each
row with its source lines ([VA] = vllm-project/vllm-ascend at the tag or commit named; vLLM =
vllm-project/vllm 0.27.1 unless named).
"""

from typing import Literal

from planner.errors import PlanInputError
from planner.schema_base import Frozen

# The hybrid (Mamba / linear-attention) pool's page rules per platform (planner/engines/vllm/pool.py).
Platform = Literal["cuda", "ascend", "ascend-pr14543", "ascend-v0.12"]
PLATFORMS: tuple[Platform, ...] = ("cuda", "ascend", "ascend-pr14543", "ascend-v0.12")
Formula = Literal["profile", "profile-cleared", "profile-310p", "cuda-graph"]
TokensRule = Literal["blocks", "concurrency"]


class EngineVersion(Frozen):
    """One engine release range with the start-up rules that differ between releases."""

    key: str
    engine: Literal["vllm-ascend", "vllm"]
    releases: str
    formula: Formula
    hybrid_platform: Platform
    tokens_rule: TokensRule
    default_gpu_memory_utilization: float
    source: str
    non_torch_absolute: bool = False  # non-torch = all device memory torch does not hold, not the increase
    moe_groups_need_ep: bool = False  # MoE dispatch communicators only with expert parallelism
    rope_cache_copies: int = 1  # rotary caches of max_position x rotary dim it holds (rope_cache_bytes)
    requested_rounds_up: bool = False  # requested = ceil(total x util), not floor (startup.requested_bytes)


# One row per release range: key, engine, releases, formula, hybrid platform, tokens rule, default
# gpu_memory_utilization; each row's source lines are in VERSION_SOURCES.
VERSION_ROWS = (
    ("vllm-ascend-0.11", "vllm-ascend", "v0.11.0rc0 .. v0.13.0rc1", "profile", "ascend-v0.12", "blocks", 0.9),
    ("vllm-ascend-0.13", "vllm-ascend", "v0.13.0rc2 .. v0.15.x", "profile", "ascend-v0.12", "blocks", 0.9),
    ("vllm-ascend-0.16", "vllm-ascend", "v0.16.0rc1 .. v0.17.x", "profile-cleared", "ascend", "blocks", 0.9),
    ("vllm-ascend-main", "vllm-ascend", "v0.18.0 .. main 182b75ea (vLLM 0.27.1)", "profile", "ascend",
     "concurrency", 0.92),
    ("vllm-ascend-310p", "vllm-ascend", "310P (NPUWorker310), main 182b75ea", "profile-310p", "ascend",
     "concurrency", 0.92),
    ("vllm-cuda", "vllm", "vLLM >= 0.21 on CUDA (read at 0.27.1)", "cuda-graph", "cuda", "concurrency", 0.92),
    ("vllm-cuda-v0", "vllm", "vLLM V0 engine (0.6.x)", "profile", "cuda", "blocks", 0.9),
)  # fmt: skip
VERSION_SOURCES = {
    "vllm-ascend-0.11": "[VA] v0.12.0rc1 worker/worker_v1.py:240-273, "
    "patch/platform/patch_mamba_config.py:37-62",
    "vllm-ascend-0.13": "[VA] v0.13.0rc2 worker/worker_v1.py determine_available_memory, "
    "ops/rotary_embedding.py:142, 271",
    "vllm-ascend-0.16": "[VA] v0.16.0rc1 worker/worker.py:350-363",
    "vllm-ascend-main": "[VA] 182b75ea worker/worker.py:483-577; vLLM 0.27.1 config/cache.py:68",
    "vllm-ascend-310p": "[VA] 182b75ea _310p/worker_310p.py:63-123",
    "vllm-cuda": "vLLM 0.27.1 v1/worker/gpu_worker.py:500-548, config/cache.py:68",
    "vllm-cuda-v0": "vLLM V0 worker/worker.py determine_num_available_blocks "
    "(log 'Memory profiling results')",
}
# Releases whose non-torch memory is "device used minus torch allocated" (memory already in use on an idle
# card counts): [VA] v0.11.0rc3 worker source; later releases count only the increase during start-up.
NON_TORCH_ABSOLUTE = frozenset({"vllm-ascend-0.11", "vllm-ascend-0.13"})
# Releases that set up the MoE dispatch methods (MC2 / all-to-all, whose communicators hold HCCL buffers) only
# when ep_size > 1: [VA] v0.20.2rc1 .. 182b75ea ops/fused_moe/moe_comm_method.py setup_moe_comm_method; up to
# v0.19.1rc1 every MoE model builds them (v0.16.0rc1 :50-54, v0.19.1rc1 :55-59).
MOE_GROUPS_NEED_EP = frozenset({"vllm-ascend-main", "vllm-ascend-310p"})
# Releases whose AscendRotaryEmbedding also keeps the interleaved cos and sin caches, one tensor of twice the
# cos/sin cache's size beside it (cos_sin_cache.view(-1, 2, r / 2).repeat(1, 1, 2)): [VA] v0.13.0rc2
# ops/rotary_embedding.py:142, 271 .. 182b75ea :126, 211; not in v0.13.0rc1 or v0.12.0rc1.
ROPE_CACHE_COPIES = {
    "vllm-ascend-0.13": 3,
    "vllm-ascend-0.16": 3,
    "vllm-ascend-main": 3,
    "vllm-ascend-310p": 3,
}
# Releases that round the requested memory up: vLLM's request_memory returns ceil(total x util) as an int
# (vLLM 0.27.1 v1/worker/utils.py:414; the same in vllm-project/vllm 0027b02769 v1/worker/utils.py
# request_memory), which gpu_worker.py determine_available_memory subtracts the non-KV bytes from. vllm-ascend
# keeps total x util as a float ([VA] 182b75ea worker/worker.py:425, _310p/worker_310p.py:142; v0.16.0rc1
# worker/worker.py:261) and truncates only the difference (int(...) at worker.py:577, v0.16.0rc1 :366;
# v0.12.0rc1 worker_v1.py:266-269 int(total x util - ...)), which is floor(total x util) - non-KV for
# integer non-KV bytes (310P: its // 2 of the float floors too). vLLM V0 (0.6.x) keeps the product a float
# as well; kvplan floors it there.
REQUESTED_ROUNDS_UP = frozenset({"vllm-cuda"})
VERSION_COLUMNS = (
    "key", "engine", "releases", "formula", "hybrid_platform", "tokens_rule",
    "default_gpu_memory_utilization",
)  # fmt: skip
VERSIONS: dict[str, EngineVersion] = {
    str(row[0]): EngineVersion.model_validate(
        {
            **dict(zip(VERSION_COLUMNS, row, strict=True)),
            "source": VERSION_SOURCES[str(row[0])],
            "non_torch_absolute": str(row[0]) in NON_TORCH_ABSOLUTE,
            "moe_groups_need_ep": str(row[0]) in MOE_GROUPS_NEED_EP,
            "rope_cache_copies": ROPE_CACHE_COPIES.get(str(row[0]), 1),
            "requested_rounds_up": str(row[0]) in REQUESTED_ROUNDS_UP,
        }
    )
    for row in VERSION_ROWS
}
DEFAULT_VERSION = "vllm-ascend-main"


def engine_version(key: str) -> EngineVersion:
    """The release range by key; PlanInputError naming the known keys otherwise."""
    if key not in VERSIONS:
        raise PlanInputError(f"--vllm-version: unknown (got {key!r}, expected one of {', '.join(VERSIONS)})")
    return VERSIONS[key]
