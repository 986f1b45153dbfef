"""The checkpoint a serving command loads for a plan's weight dtype (`kvplan vllm`, `kvplan sglang`): never
a repo whose weights differ from it. Which repo holds which weights is the model's fact, shared by the
engines' rooms; `quantization` is vLLM's flag for it (SGLang names msModelSlim weights its own way).

vllm-ascend runs quantized weights from msModelSlim checkpoints (W8A8 / W4A8 / W4A4,
quant_model_description.json) loaded with `--quantization ascend`; its nightly CI configs and tutorials name
the repos below (each entry cites the config or doc, with the commit). Hugging Face base repos hold the
model's released weights, which are 16-bit for most cards and FP8 for a few (RELEASED_DTYPE). A (model,
dtype) pair with no known checkpoint gets no repo id: the CLI asks for --weights-path instead (one line,
exit 2).
"""

from __future__ import annotations

from planner.errors import PlanInputError
from planner.records import record
from planner.schema import ModelCard

# vllm-ascend's flag for msModelSlim (W8A8 / W4A8 / W4A4) checkpoints; every nightly config serving one
# passes it, e.g. tests/e2e/nightly/single_node/models/configs/Qwen3-32B-Int8-A2.yaml @67b1ac5e (server_cmd).
ASCEND_QUANTIZATION = "ascend"
# kvplan weight schemes that run from an msModelSlim checkpoint on Ascend (planner/dtypes.py names).
MSMODELSLIM_SCHEMES = frozenset({"int8", "w4a8", "w4a4"})
_VA = "https://github.com/vllm-project/vllm-ascend/blob/"
_NIGHTLY = "tests/e2e/nightly/single_node/models/configs/"


@record
class Checkpoint:
    """A repo `vllm serve` can load for one model card at one kvplan weight scheme, and where it is named."""

    repo: str
    quantization: str | None  # the --quantization value the engine needs (None: read from the checkpoint)
    source: str


CHECKPOINTS: dict[tuple[str, str], Checkpoint] = {
    ("qwen3-32b", "int8"): Checkpoint(
        "vllm-ascend/Qwen3-32B-W8A8",
        "ascend",
        f"{_VA}67b1ac5e7a2f0d98606c720d500cdb3f8d675054/{_NIGHTLY}Qwen3-32B-Int8-A2.yaml",
    ),
    ("qwen3-32b", "w4a4"): Checkpoint(
        "vllm-ascend/Qwen3-32B-W4A4",
        "ascend",
        f"{_VA}4840e3900bf2d4e5199c57894710e18ec278df83/docs/source/tutorials/single_npu_qwen3_w4a4.md",
    ),
    ("qwen3-30b-a3b", "int8"): Checkpoint(
        "vllm-ascend/Qwen3-30B-A3B-W8A8",
        "ascend",
        f"{_VA}67b1ac5e7a2f0d98606c720d500cdb3f8d675054/{_NIGHTLY}Qwen3-30B-A3B-W8A8.yaml",
    ),
    ("qwen3-235b-a22b", "int8"): Checkpoint(
        "vllm-ascend/Qwen3-235B-A22B-w8a8",
        "ascend",
        f"{_VA}eab306b09c1fc6e5cb038c2d78192d9870cbbf58/docs/source/tutorials/Qwen3-235B-A22B.md",
    ),
    ("qwen3.5-27b", "int8"): Checkpoint(
        "Eco-Tech/Qwen3.5-27B-w8a8-mtp",
        "ascend",
        f"{_VA}2599328c143ac27756f24b187d719bf84030f1b5/{_NIGHTLY}Qwen3.5-27B-w8a8-A3.yaml",
    ),
    ("qwen3.5-122b-a10b", "int8"): Checkpoint(
        "Eco-Tech/Qwen3.5-122B-A10B-w8a8-mtp",
        "ascend",
        f"{_VA}67b1ac5e7a2f0d98606c720d500cdb3f8d675054/{_NIGHTLY}Qwen3.5-122B-A10B-W8A8-A3.yaml",
    ),
    ("qwen3.5-122b-a10b", "w4a8"): Checkpoint(
        "Eco-Tech/Qwen3.5-122B-A10B-w4a8",
        "ascend",
        f"{_VA}d5e9816065ede613327d93908f87fee9f5c47128/tests/e2e/weekly/single_node/configs/Qwen3.5-122B-A10B-w4a8-A3.yaml",
    ),
    ("qwen3.5-397b-a17b", "int8"): Checkpoint(
        "Eco-Tech/Qwen3.5-397B-A17B-w8a8-mtp",
        "ascend",
        f"{_VA}2599328c143ac27756f24b187d719bf84030f1b5/{_NIGHTLY}Qwen3.5-397B-A17B-W8A8-mtp-A3.yaml",
    ),
    ("qwen3.5-397b-a17b", "w4a8"): Checkpoint(
        "Eco-Tech/Qwen3.5-397B-A17B-w4a8-mtp",
        "ascend",
        f"{_VA}f62ddb51765f6f865a222699ad27b608a17f6787/{_NIGHTLY}Qwen3.5-397B-A17B-w4a8-mtp-A2.yaml",
    ),
    ("qwen3.8-27b", "int8"): Checkpoint(
        "Eco-Tech/Qwen3.8-27B-w8a8",
        "ascend",
        "https://github.com/vllm-project/recipes/blob/62a146b6003c124e03b71eb8d1d84917b2d570b4/models/Qwen/Qwen3.8-27B.yaml",
    ),
    ("qwen3.8-27b", "fp8"): Checkpoint(
        "Qwen/Qwen3.8-27B-FP8",
        None,
        "https://github.com/vllm-project/recipes/pull/847 (native block-scaled FP8, 950PR)",
    ),
    ("deepseek-v3.2", "int8"): Checkpoint(
        "vllm-ascend/DeepSeek-V3.2-W8A8",
        "ascend",
        f"{_VA}086c093347118d0448df6ac7e80a7b4dd1cdc4f8/tests/e2e/nightly/multi_node/config/DeepSeek-V3_2-W8A8-A3-dual-nodes.yaml",
    ),
    ("deepseek-r1-0528", "int8"): Checkpoint(
        "vllm-ascend/DeepSeek-R1-0528-W8A8",
        "ascend",
        f"{_VA}67b1ac5e7a2f0d98606c720d500cdb3f8d675054/{_NIGHTLY}DeepSeek-R1-0528-W8A8.yaml",
    ),
    ("minimax-m2.5", "int8"): Checkpoint(
        "Eco-Tech/MiniMax-M2.5-w8a8-QuaRot",
        "ascend",
        f"{_VA}2599328c143ac27756f24b187d719bf84030f1b5/{_NIGHTLY}MiniMax-M2.5-W8A8-A3.yaml",
    ),
    ("kimi-k2.5", "w4a8"): Checkpoint(
        "Eco-Tech/Kimi-K2.5-W4A8",
        "ascend",
        f"{_VA}67b1ac5e7a2f0d98606c720d500cdb3f8d675054/tests/e2e/nightly/multi_node/internal_dp/config/Kimi-K2_5-W4A8-A2-dual-nodes.yaml",
    ),
    # Moonshot's own repos hold the native INT4 layout (w4a16-moe: compressed-tensors, read by vLLM itself)
    ("kimi-k2-thinking", "w4a16-moe"): Checkpoint(
        "moonshotai/Kimi-K2-Thinking",
        None,
        f"{_VA}d3708120307f874e023fa37d0ed612297c12149a/docs/source/tutorials/models/Kimi-K2-Thinking.md",
    ),
    ("kimi-k2.5", "w4a16-moe"): Checkpoint(
        "moonshotai/Kimi-K2.5", None, "modelcards/kimi-k2.5.yaml source.hf_repo (its quantization_config)"
    ),
    ("kimi-k2.6", "w4a16-moe"): Checkpoint(
        "moonshotai/Kimi-K2.6", None, "modelcards/kimi-k2.5.yaml sources (Kimi-K2.6's quantization_config)"
    ),
    ("glm-5.1", "int8"): Checkpoint(
        "Eco-Tech/GLM-5.1-w8a8",
        "ascend",
        f"{_VA}67b1ac5e7a2f0d98606c720d500cdb3f8d675054/tests/e2e/nightly/multi_node/internal_dp/config/GLM5_1-W8A8-A3-dual-nodes.yaml",
    ),
    ("glm-5.2", "int8"): Checkpoint(
        "Eco-Tech/GLM-5.2-w8a8",
        "ascend",
        f"{_VA}67b1ac5e7a2f0d98606c720d500cdb3f8d675054/tests/e2e/nightly/multi_node/internal_dp/config/GLM5_2-W8A8-A3-dual-nodes.yaml",
    ),
}

# Cards whose Hugging Face repo does not hold 16-bit weights: the weight scheme it does hold, or None when
# kvplan does not know it (then no plan dtype gets that repo printed).
RELEASED_DTYPE: dict[str, str | None] = {
    "deepseek-v3": "fp8",  # modelcards/deepseek-v3.yaml: released weights FP8 (e4m3, 128x128 blocks)
    "deepseek-r1": "fp8",  # same config as V3 (FP8 quantization_config, modelcards/deepseek-v3.yaml sources)
    "minimax-m2.5": "fp8",  # modelcards/minimax-m2.5.yaml notes: released weights FP8
    "deepseek-v3.2": None,  # not checked
    "kimi-k2.5": None,  # native INT4 experts (w4a16-moe): listed per release in CHECKPOINTS
}
SIXTEEN_BIT = frozenset({"bf16", "fp16"})


def checkpoint(card: ModelCard, *, scheme: str, alias: str | None = None) -> Checkpoint | None:
    """The repo whose weights are the plan's scheme: a listed quantized checkpoint (keyed by the alias the
    user typed, e.g. deepseek-r1-0528, then by the card id), else the card's own repo when its released
    weights are that scheme (16-bit for a bf16/fp16 plan); None when none is known."""
    listed = CHECKPOINTS.get((alias or "", scheme)) or CHECKPOINTS.get((card.id, scheme))
    if listed is not None:
        return listed
    released = RELEASED_DTYPE.get(card.id, "bf16")
    upcast = scheme == "fp32" and released in SIXTEEN_BIT  # vLLM --dtype float32 upcasts 16-bit weights
    same = released == scheme or (released in SIXTEEN_BIT and scheme in SIXTEEN_BIT) or upcast
    if not same:
        return None
    return Checkpoint(
        card.source.hf_repo, None, f"modelcards/{card.id}.yaml source.hf_repo ({released} weights)"
    )


def quantization_flag(scheme: str, *, vendor: str) -> str | None:
    """--quantization for a checkpoint the user brings (--weights-path): `ascend` for msModelSlim schemes on
    Ascend cards, else None (vLLM reads the checkpoint's own quantization config)."""
    return ASCEND_QUANTIZATION if vendor == "huawei" and scheme in MSMODELSLIM_SCHEMES else None


def known_checkpoint(card: ModelCard, *, scheme: str, alias: str | None = None) -> Checkpoint:
    """checkpoint(), or PlanInputError asking for --weights-path when kvplan knows none to print."""
    found = checkpoint(card, scheme=scheme, alias=alias)
    if found is None:
        raise PlanInputError(
            f"--weights-path: kvplan knows no {scheme} checkpoint of {card.id} to print (got none, "
            f"expected the path or repo of its {scheme} weights; {card.source.hf_repo} holds others)"
        )
    return found
