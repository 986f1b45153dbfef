"""Data types: storage dtypes (KV cache, states, activations) and weight quantization schemes.

A weight scheme says how many bits each quantized weight takes, which scale tensors come with it,
which compute units the matmuls run on, and which native dtype the card must have for it.
"""

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field


class StorageDType(str, Enum):
    """Element types of tensors kept in device memory (KV cache, recurrent state, activations)."""

    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"
    int8 = "int8"

    @property
    def bits(self) -> int:
        """Bits per element."""
        return _STORAGE_BITS[self.value]


_STORAGE_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8}

# Spellings of the floating-point dtypes (torch's and Hugging Face's), both as storage and as weights.
_FLOAT_ALIASES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}

# Spellings users and HF configs use for storage dtypes.
STORAGE_ALIASES = {
    **_FLOAT_ALIASES,
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "float8": "fp8",
    "c8": "int8",
}


class WeightScheme(BaseModel):
    """How a weight dtype is stored and computed.

    weight_bits                 bits per quantized weight element
    compute_dtype               the peak-throughput key used for its matmuls (card.peak_tflop_per_s)
    requires_native             dtype the card must list in native_dtypes (None: runs anywhere)
    scale_bytes_per_channel     per output channel of each quantized matrix (scales, offsets, bias)
    group_size                  input elements sharing one group scale (0: no grouping)
    scale_bytes_per_group       bytes of scale+offset per group per output channel
    other_linears               scheme of every matmul outside the routed experts when the scheme exists for
                                MoE expert layers only (None: the scheme covers every matmul)
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    weight_bits: int = Field(gt=0)
    compute_dtype: str
    requires_native: str | None
    scale_bytes_per_channel: int = Field(ge=0)
    group_size: int = Field(ge=0)
    scale_bytes_per_group: int = Field(ge=0)
    description: str
    other_linears: str | None = None


# Scale layouts follow what the engines load:
# - fp8 (W8A8-FP8): one fp32 scale per output channel (compressed-tensors / vLLM channel-wise FP8).
# - int8 (W8A8, msModelSlim as MindIE loads it): per output channel an int64 deq_scale and an int32
#   quant_bias, 12 B; per-tensor input scale/offset are negligible.  [assumed: msModelSlim W8A8 layout]
# - w8a16: one fp32 scale per output channel.
# - w4a8 (msModelSlim W4A8 dynamic, vllm-ascend w4a8_dynamic): int4 weights with a per-channel scale and
#   offset (fp32 each, 8 B), int8 activations quantized per token, int8 matmuls, for the routed experts only:
#   vllm-ascend registers W4A8_DYNAMIC for "moe" layers alone (vllm_ascend/quantization/methods/w4a8.py:36
#   @182b75ea; its quantization design doc: "for MoE layers"), so every other matmul (attention, dense and
#   shared-expert MLPs, lm_head) runs as W8A8 (int8), and a dense model's "w4a8" is its W8A8.
#   [source for vllm-ascend; assumed: scale layout, and the same split under MindIE]
# - w4a16: group size 128 with a bf16 scale and a bf16 offset per group (AWQ/GPTQ-style), 4 B/group.
# - w4a16-moe: the routed experts int4, symmetric, group 32; every other matmul 16-bit: compressed-tensors
#   pack-quantized as Kimi-K2-Thinking, K2.5 and K2.6 ship (quantization_config: num_bits 4, type int,
#   group_size 32, symmetric; ignore self_attn, shared_experts, the dense mlp and lm_head;
#   modelcards/kimi-k2.5.yaml). The checkpoint holds one bf16 scale a group (2 B); vllm-ascend also
#   allocates an all-zero bf16 offset of the scale's shape, which its fused MoE operator requires
#   (vllm_ascend/quantization/methods/w4a16.py:239-244 @182b75ea, the same at v0.18.0 and v0.20.2rc1), so
#   a device holds 4 B a group: Kimi-K2.5's text model 657.6 GB on the devices, 594.2 GB on disk, where
#   uniform w4a16 counts 549.0 GB.
# - fp32: float32 weights, activations and KV cache (4 bytes each), as an eager torch stack serves a
#   checkpoint loaded with torch_dtype=float32. Its matmuls run at the card's fp32 peak
#   (peak_tflop_per_s.fp32, which a profile states only with a source; torch_npu leaves HF32 off for
#   matmuls: torch.npu.matmul.allow_hf32 defaults to False). No native-dtype gate: every card stores fp32;
#   a card without the peak is refused by planner/capacity.check_supported, an engine that cannot serve
#   fp32 by its room (weight_dtype_refusal).
# - w4a4 (msModelSlim W4A4 flatquant dynamic, vllm-ascend W4A4_FLATQUANT_DYNAMIC, registered for "linear"
#   layers: vllm_ascend/quantization/methods/w4a4_flatquant.py @1031b861): int4 weights packed 8 to an int32
#   with an fp32 scale and an fp32 offset per output channel (8 B), activations quantized to int4 per token by
#   npu_kronecker_quant through two small per-layer transform matrices (left and right, a x b = the input
#   width; negligible bytes), int4 x int4 npu_quant_matmul. No card profile states an int4 peak, so its
#   matmuls are timed at the card's int8 peak.  [source for the layout; assumed: the int8 rate (a lower bound
#   on speed if the cube runs int4 faster), and the same split for routed experts and under MindIE / SGLang]
_FP32_DESCRIPTION = "float32 weights and activations (eager stacks; the card's fp32 matmul peak)"
_W4A4_DESCRIPTION = (
    "INT4 weights (per channel) and INT4 activations per token (msModelSlim W4A4 flatquant); timed at the "
    "int8 peak"
)
_W4A16_MOE_DESCRIPTION = (
    "INT4 routed experts (group 32, symmetric), other matmuls 16-bit (Kimi-K2's native INT4)"
)
_W4A8_DESCRIPTION = "INT4 weights (per channel), INT8 activations per token (msModelSlim W4A8 dynamic)"
# One row per scheme, in WeightScheme's field order: name, weight_bits, compute_dtype, requires_native,
# scale_bytes_per_channel, group_size, scale_bytes_per_group, description, other_linears.
_SCHEME_ROWS: tuple[tuple[str, int, str, str | None, int, int, int, str, str | None], ...] = (
    ("fp32", 32, "fp32", None, 0, 0, 0, _FP32_DESCRIPTION, None),  # needs peak_tflop_per_s.fp32 (above)
    ("bf16", 16, "bf16", "bf16", 0, 0, 0, "bfloat16 weights and activations", None),
    ("fp16", 16, "fp16", "fp16", 0, 0, 0, "float16 weights and activations", None),
    ("fp8", 8, "fp8", "fp8", 4, 0, 0, "W8A8 in FP8 (e4m3): needs FP8 matrix units", None),
    ("int8", 8, "int8", "int8", 12, 0, 0, "W8A8 in INT8 (MindIE/msModelSlim W8A8)", None),
    ("w8a16", 8, "bf16", None, 4, 0, 0, "INT8 weights dequantized to 16-bit activations", None),
    ("w4a8", 4, "int8", "int8", 8, 0, 0, _W4A8_DESCRIPTION, "int8"),  # routed experts only (above)
    ("w4a4", 4, "int8", "int8", 8, 0, 0, _W4A4_DESCRIPTION, None),  # every linear; int8 rate (above)
    ("w4a16", 4, "bf16", None, 0, 128, 4, "INT4 weights (group 128) dequantized to 16-bit activations", None),
    ("w4a16-moe", 4, "bf16", None, 0, 32, 4, _W4A16_MOE_DESCRIPTION, "bf16"),  # Kimi's native INT4 (above)
)
WEIGHT_SCHEMES: dict[str, WeightScheme] = {
    row[0]: WeightScheme.model_validate(dict(zip(WeightScheme.model_fields, row, strict=True)))
    for row in _SCHEME_ROWS
}

WEIGHT_ALIASES = {
    **_FLOAT_ALIASES,
    "w8a8": "int8",
    "w8a8-int8": "int8",
    "w8a8-fp8": "fp8",
    "fp8_e4m3": "fp8",
    "int4": "w4a16",
    "w4a16-int4": "w4a16",
    "awq": "w4a16",
    "gptq": "w4a16",
    "w4a16-experts": "w4a16-moe",
}


# Weight schemes whose activations are not the card's 16-bit activation dtype (bf16, else fp16).
_OWN_ACTIVATION = {"fp16": StorageDType.fp16, "fp32": StorageDType.fp32}


def activation_dtype_of(scheme_name: str, *, card_activation: str) -> StorageDType:
    """Dtype of activations, unquantized weights and the default (auto) KV cache under a weight scheme:
    fp16 weights run in fp16, fp32 weights in fp32, every other scheme in the card's 16-bit activation dtype
    (`card_activation`: bf16, else fp16), as vLLM's dtype=auto and MindIE without KV quantization."""
    return _OWN_ACTIVATION.get(scheme_name, StorageDType(card_activation))


def weight_scheme(name: str) -> WeightScheme:
    """Look up a weight scheme by name or alias; raises KeyError if unknown."""
    key = name.strip().lower()
    return WEIGHT_SCHEMES[WEIGHT_ALIASES.get(key, key)]


def storage_dtype(name: str) -> StorageDType:
    """Look up a storage dtype by name or alias; raises ValueError if unknown."""
    key = name.strip().lower()
    return StorageDType(STORAGE_ALIASES.get(key, key))
