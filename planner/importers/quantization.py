"""A checkpoint's weight quantization -> the kvplan weight dtype (--dtype, planner/dtypes.py) it needs.

Read from config.json's `quantization_config`, or from the Ascend msModelSlim `quant_model_description.json`
beside it (vllm-ascend's AscendModelSlimConfig loads that file when `quant_method` is "ascend" or absent:
vllm_ascend/quantization/modelslim_config.py @182b75ea). What each format states, and the mapping:
- fp8, fbgemm_fp8 (transformers FineGrainedFP8 / vLLM fp8): `fmt` (e4m3, e5m2), `weight_block_size` -> fp8
- awq, gptq: `bits` 4 -> w4a16, 8 -> w8a16 (16-bit activations), `group_size`
- compressed-tensors (llm-compressor): per `config_groups` entry `weights` and `input_activations`
  {num_bits, type int|float}: float 8/8 -> fp8, int 8/8 -> int8, int 4/8 -> w4a8, int 4/4 -> w4a4, int 8 or 4
  with no activation quantization -> w8a16 / w4a16 (int 4, symmetric, group 32 with attention and the
  shared experts in `ignore`: Kimi-K2's native INT4 -> w4a16-moe); `kv_cache_scheme` {num_bits 8, type
  float} -> fp8 KV (an int 8 one is named, not mapped: no engine kvplan models reads int8 KV scales from
  compressed-tensors)
- msModelSlim: `model_quant_type` W8A8, W8A8_DYNAMIC, W8A8_MIX, W8A8S, W8A8SC -> int8; W4A8, W4A8_DYNAMIC ->
  w4a8; W4A4_DYNAMIC, W4A4_FLATQUANT_DYNAMIC -> w4a4; W8A16, W4A16; W8A8FP8_DYNAMIC, W8A8_MXFP8 -> fp8 (as
  lab/published writes MXFP8); FLOAT: not quantized. `kv_cache_type` "C8" -> int8 KV.
Anything else (bitsandbytes, NVFP4, MXFP4, other bit widths) is named with kvplan's dtype left None: the
caller says so in a note, never an error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planner import readers
from planner.errors import DataFileError
from planner.records import record

MODELSLIM_FILE = "quant_model_description.json"  # vllm-ascend MODELSLIM_CONFIG_FILENAME


@record
class CheckpointQuantization:
    """What a checkpoint's files say about its quantized weights.

    method     the format as stated: quant_method ('fp8', 'awq', ...) or 'msModelSlim'
    detail     the stated parameters, e.g. '4-bit, group 128'
    dtype      kvplan's weight dtype (--dtype) for it; None where kvplan has no scheme for the format
    kv_dtype   a quantized KV cache the checkpoint carries scales for ('int8': C8, 'fp8'), else None
    """

    method: str
    detail: str
    dtype: str | None
    kv_dtype: str | None = None


_FP8_METHODS = ("fp8", "fbgemm_fp8")
_GROUPED_METHODS = ("awq", "gptq")
_BITS_TO_DTYPE = {4: "w4a16", 8: "w8a16"}  # weight-only integer formats: 16-bit activations
# compressed-tensors (weight type, weight bits, activation type or None, activation bits) -> kvplan dtype
_TENSOR_SCHEMES: dict[tuple[str | None, int | None, str | None, int | None], str] = {
    ("float", 8, "float", 8): "fp8",
    ("int", 8, "int", 8): "int8",
    ("int", 4, "int", 8): "w4a8",
    ("int", 4, "int", 4): "w4a4",
    ("int", 8, None, None): "w8a16",
    ("int", 4, None, None): "w4a16",
}
_MODELSLIM_TYPES = {
    **dict.fromkeys(("W8A8", "W8A8_DYNAMIC", "W8A8_MIX", "W8A8S", "W8A8SC"), "int8"),
    **dict.fromkeys(("W4A8", "W4A8_DYNAMIC"), "w4a8"),
    **dict.fromkeys(("W4A4_DYNAMIC", "W4A4_FLATQUANT_DYNAMIC"), "w4a4"),
    "W8A16": "w8a16",
    "W4A16": "w4a16",
    **dict.fromkeys(("W8A8FP8_DYNAMIC", "W8A8_MXFP8"), "fp8"),
}


def checkpoint_quantization(config: Mapping[str, Any], *, directory: Path) -> CheckpointQuantization | None:
    """The quantization config.json states (else msModelSlim's description in `directory`), or None for an
    unquantized checkpoint. A multimodal wrapper (Kimi-K2.5's kimi_k25, whose text model is `text_config`)
    may state it in text_config alone: read there when the top level states none."""
    stated = config.get("quantization_config")
    text_config = config.get("text_config")
    if stated is None and isinstance(text_config, Mapping):
        stated = text_config.get("quantization_config")
    method = str(stated.get("quant_method") or "") if isinstance(stated, Mapping) else ""
    if isinstance(stated, Mapping) and method not in ("", "ascend"):
        return _hf_quantization(stated, method=method.lower())
    found = _modelslim_quantization(directory / MODELSLIM_FILE)
    if found is None and method == "ascend":
        return CheckpointQuantization(
            "msModelSlim", f"quant_method ascend, no {MODELSLIM_FILE} beside it", None
        )
    if found is None and stated is not None:  # a string, a list, or an object naming no quant_method
        detail = f"quantization_config {str(stated)[:60]!r} names no quant_method"
        return CheckpointQuantization("unnamed", detail, None)
    return found


def _hf_quantization(stated: Mapping[str, Any], *, method: str) -> CheckpointQuantization:
    if method in _FP8_METHODS:
        block = stated.get("weight_block_size")
        blocks = f", weight blocks {'x'.join(map(str, block))}" if isinstance(block, list) else ""
        return CheckpointQuantization(method, f"{stated.get('fmt') or 'e4m3'}{blocks}", "fp8")
    if method in _GROUPED_METHODS:
        bits, group = (
            stated.get("bits", stated.get("w_bit")),
            stated.get("group_size", stated.get("q_group_size")),
        )
        detail = f"{bits}-bit" + (f", group {group}" if group else "")
        return CheckpointQuantization(
            method, detail, _BITS_TO_DTYPE.get(bits) if isinstance(bits, int) else None
        )
    if method == "compressed-tensors":
        return _compressed_tensors(stated)
    return CheckpointQuantization(method, "", None)


def _scheme_of(args: object) -> tuple[str | None, int | None]:
    """(type, num_bits) of a compressed-tensors QuantizationArgs dict; (None, None) when absent."""
    if not isinstance(args, Mapping):
        return None, None
    bits = args.get("num_bits")
    return str(args.get("type") or "int"), bits if isinstance(bits, int) else None


def _compressed_tensors(stated: Mapping[str, Any]) -> CheckpointQuantization:
    groups = stated.get("config_groups")
    found = []
    for group in groups.values() if isinstance(groups, Mapping) else ():
        if isinstance(group, Mapping):
            weights, acts = _scheme_of(group.get("weights")), _scheme_of(group.get("input_activations"))
            found.append((*weights, *acts))
    words = [f"W {w[0]}{w[1]}" + (f" A {w[2]}{w[3]}" if w[2] else "") for w in dict.fromkeys(found)]
    dtypes = {_TENSOR_SCHEMES.get(key) for key in found}
    kv_type, kv_bits = _scheme_of(stated.get("kv_cache_scheme"))
    # fp8 KV scales: vLLM reads them (--kv-cache-dtype fp8); int8 ones no engine here reads: vLLM has no int8
    # KV and vllm-ascend's compressed-tensors path quantizes linear and MoE layers only
    # (compressed_tensors_config.py get_quant_method @182b75ea), so that checkpoint's KV stays 16-bit
    kv_dtype = "fp8" if (kv_type, kv_bits) == ("float", 8) else None
    dtype = dtypes.pop() if len(dtypes) == 1 else None  # mixed groups: no single --dtype
    if dtype == "w4a16" and _kimi_native_int4(stated):
        dtype = "w4a16-moe"
    detail = ", ".join(words) + (f", KV cache {kv_type}{kv_bits}" if kv_type else "")
    return CheckpointQuantization(
        "compressed-tensors", detail or str(stated.get("format") or ""), dtype, kv_dtype
    )


# The ignore list of an experts-only INT4 checkpoint: attention and shared experts stay 16-bit
_EXPERTS_ONLY_IGNORED = ("self_attn", "shared_experts")


def _kimi_native_int4(stated: Mapping[str, Any]) -> bool:
    """True for the w4a16-moe layout (planner/dtypes.py): every weight group int4, symmetric, group 32, and
    the ignore list keeping attention and the shared experts out of it, as Kimi-K2-Thinking ships."""
    groups = stated.get("config_groups")
    weights = (
        [g.get("weights") for g in groups.values() if isinstance(g, Mapping)]
        if isinstance(groups, Mapping)
        else []
    )
    grouped = bool(weights) and all(
        isinstance(w, Mapping) and w.get("group_size") == 32 and w.get("symmetric") is True for w in weights
    )
    ignored = " ".join(str(item) for item in stated.get("ignore") or () if isinstance(item, str))
    return grouped and all(part in ignored for part in _EXPERTS_ONLY_IGNORED)


def _modelslim_quantization(path: Path) -> CheckpointQuantization | None:
    """msModelSlim's description: model_quant_type, else the commonest per-tensor type that is not FLOAT."""
    if not path.is_file():
        return None
    try:
        description = readers.json_object(readers.read_text_capped(path), where=str(path))
    except DataFileError as exc:
        return CheckpointQuantization("msModelSlim", f"{MODELSLIM_FILE} unreadable: {exc}", None)
    stated = description.get("model_quant_type")
    tensor_types = Counter(
        v for k, v in description.items() if k.endswith(".weight") and isinstance(v, str) and v != "FLOAT"
    )
    quant_type = str(stated) if stated else (tensor_types.most_common(1) or [("FLOAT", 0)])[0][0]
    # C8 for GQA (kv_cache_type), FA quantization for MLA (fa_quant_type: int8 K on A2/A3, fp8 on a 950)
    kv_dtype = (
        "int8" if description.get("kv_cache_type") == "C8" or description.get("fa_quant_type") else None
    )
    if quant_type == "FLOAT" and kv_dtype is None:
        return None
    detail = quant_type + (", KV cache C8" if kv_dtype else "")
    return CheckpointQuantization("msModelSlim", detail, _MODELSLIM_TYPES.get(quant_type.upper()), kv_dtype)


def import_note(quant: CheckpointQuantization, *, origin: str) -> str:
    """The `models import` report line: the --dtype (and --kv-dtype) to plan the checkpoint with, or that
    kvplan has no dtype for its format."""
    stated = quant.method[:40] + (f" ({quant.detail[:120]})" if quant.detail else "")  # a config's words
    if quant.dtype is None:
        return (
            f"note: {origin}: quantization {stated} is not a format kvplan maps to a --dtype; the card is "
            f"planned with --dtype as given (default auto: the card's 16-bit dtype): pass the closest scheme "
            "(planner/dtypes.py)"
        )
    kv = f" --kv-dtype {quant.kv_dtype}" if quant.kv_dtype else ""
    return (
        f"note: {origin}: quantization {stated}: plan this checkpoint with --dtype {quant.dtype}{kv} "
        f"(recorded as the card's checkpoint_dtype; the plan says so when --dtype differs)"
    )
