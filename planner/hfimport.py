"""Hugging Face config.json -> ModelCard, and safetensors headers -> exact weight bytes per dtype (offline).

`card_from_config_dict` maps a config dict (Qwen3, Qwen3-MoE, Qwen3-Next, Qwen3.5, Llama, DeepSeek-V3)
onto the card schema, names unchanged. `checkpoint_summary` reads only safetensors headers (no tensor data,
no safetensors library) and totals them per dtype and per group (text, MTP, vision, quantization scales),
so `parameter_check` can set the checkpoint against params.parameter_count.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from planner import __version__, params
from planner.errors import DataFileError
from planner.schema import Frozen, ModelCard

HEADER_LENGTH_BYTES = 8  # safetensors: u64 little-endian header size, then the JSON header
MAX_HEADER_BYTES = 100_000_000  # [datasheet: safetensors format spec, header limited to 100 MB]
CARD_ID_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")  # as ModelCard.id
# Trailing name parts of quantization side tensors (FP8 block scales, GPTQ/AWQ zeros): not model parameters.
SCALE_SUFFIXES = ("weight_scale_inv", "weight_scale", "input_scale", "scales", "qzeros", "g_idx")
VISION_PARTS = ("visual", "vision_tower", "vision_model", "multi_modal_projector")
_LAYER_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.")
# Outer model_type of multimodal configs whose text model sits under "text_config".
NESTED_TEXT_TYPES = ("qwen3_5", "qwen3_5_moe")


@dataclass
class _Config:
    """The text-model config being read, where it came from, and the values kvplan had to supply."""

    raw: Mapping[str, Any]
    outer: Mapping[str, Any]
    where: str
    prefix: str
    model_type: str
    derived: dict[str, str] = field(default_factory=dict)

    def required(self, key: str) -> Any:
        """The value of `key`; DataFileError naming the file and field when absent or null."""
        value = self.raw.get(key)
        if value is None:
            raise DataFileError(f"{self.where}: {self.prefix}{key}: required field missing "
                                f"(got nothing, expected a value for model_type {self.model_type!r})")
        return value

    def optional(self, key: str, default: Any = None) -> Any:
        """The value of `key`, or `default` when absent or null."""
        value = self.raw.get(key)
        return default if value is None else value

    def defaulted(self, key: str, default: Any, *, why: str) -> Any:
        """The value of `key` (text config, then outer config), else `default`, recorded as derived."""
        for mapping in (self.raw, self.outer):
            if mapping.get(key) is not None:
                return mapping[key]
        self.derived[key] = f"{key} = {default} ({why})"
        return default

    def must_equal(self, key: str, expected: Any) -> None:
        """Reject a config feature the card schema cannot express."""
        value = self.raw.get(key)
        if value is not None and value != expected:
            raise DataFileError(f"{self.where}: {self.prefix}{key}: not supported by the card schema "
                                f"(got {value!r}, expected {expected!r})")


def _base_fields(cfg: _Config) -> dict[str, Any]:
    heads = cfg.required("num_attention_heads")
    dtype = next((m[k] for m in (cfg.raw, cfg.outer) for k in ("torch_dtype", "dtype") if m.get(k)), None)
    return {
        "torch_dtype": dtype or cfg.defaulted("torch_dtype", "bfloat16", why="absent from config.json"),
        "hidden_size": cfg.required("hidden_size"),
        "num_hidden_layers": cfg.required("num_hidden_layers"),
        "num_attention_heads": heads,
        "num_key_value_heads": cfg.defaulted("num_key_value_heads", heads,
                                             why="absent: transformers then uses num_attention_heads"),
        "vocab_size": cfg.required("vocab_size"),
        "tie_word_embeddings": cfg.defaulted("tie_word_embeddings", False,
                                             why="absent: the transformers default for this model_type"),
        "max_position_embeddings": cfg.required("max_position_embeddings"),
        "attention_bias": cfg.optional("attention_bias", False),
    }


def _llama(cfg: _Config) -> dict[str, Any]:
    cfg.must_equal("mlp_bias", False)
    fields = {**_base_fields(cfg), "intermediate_size": cfg.required("intermediate_size")}
    head_dim = cfg.optional("head_dim")
    if head_dim is None:
        hidden, heads = fields["hidden_size"], fields["num_attention_heads"]
        if hidden % heads:
            raise DataFileError(f"{cfg.where}: head_dim: absent and hidden_size is not a multiple of "
                                f"num_attention_heads (got {hidden} and {heads})")
        head_dim = hidden // heads
        cfg.derived["head_dim"] = f"head_dim = hidden_size / num_attention_heads = {head_dim} (absent)"
    return {**fields, "head_dim": head_dim}


def _qwen3(cfg: _Config) -> dict[str, Any]:
    fields = {**_base_fields(cfg), "head_dim": cfg.required("head_dim"), "qk_norm": True}
    if "num_experts" in cfg.raw and "intermediate_size" not in cfg.raw:
        # Every layer is MoE (checked in _qwen_moe), so the dense width is never used; the schema needs one.
        fields["intermediate_size"] = cfg.required("moe_intermediate_size")
        cfg.derived["intermediate_size"] = ("intermediate_size = moe_intermediate_size (absent and unused: "
                                            "every layer is MoE; placeholder the schema requires)")
    else:
        fields["intermediate_size"] = cfg.required("intermediate_size")
    return fields


def _qwen_moe(cfg: _Config) -> dict[str, Any]:
    cfg.must_equal("decoder_sparse_step", 1)
    cfg.must_equal("mlp_only_layers", [])
    return {
        "num_experts": cfg.required("num_experts"),
        "num_experts_per_tok": cfg.required("num_experts_per_tok"),
        "moe_intermediate_size": cfg.required("moe_intermediate_size"),
        "shared_expert_intermediate_size": cfg.optional("shared_expert_intermediate_size") or None,
    }


def _hybrid(cfg: _Config) -> dict[str, Any]:
    if cfg.optional("layer_types") is None and cfg.optional("full_attention_interval") is None:
        raise DataFileError(f"{cfg.where}: {cfg.prefix}layer_types: required field missing (got neither "
                            f"layer_types nor full_attention_interval, expected one for {cfg.model_type!r})")
    fields = {key: cfg.required(key) for key in (
        "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
        "linear_num_key_heads", "linear_num_value_heads")}
    return {**fields, "layer_types": cfg.optional("layer_types"),
            "full_attention_interval": cfg.optional("full_attention_interval")}


def _qwen3_5(cfg: _Config) -> dict[str, Any]:
    fields = {**_qwen3(cfg), **_hybrid(cfg),
              "attn_output_gate": cfg.defaulted("attn_output_gate", True, why="absent: always on in Qwen3.5"),
              "mtp_num_hidden_layers": cfg.optional("mtp_num_hidden_layers", 0),
              "mamba_ssm_dtype": cfg.optional("mamba_ssm_dtype")}
    if "num_experts" in cfg.raw:
        fields.update(_qwen_moe(cfg))
    return fields


def _deepseek_v3(cfg: _Config) -> dict[str, Any]:
    cfg.must_equal("moe_layer_freq", 1)
    fields = {**_base_fields(cfg), "intermediate_size": cfg.required("intermediate_size")}
    for key in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
                "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"):
        fields[key] = cfg.required(key)
    return {**fields, "q_lora_rank": cfg.optional("q_lora_rank"),
            "n_shared_experts": cfg.optional("n_shared_experts") or None,
            "first_k_dense_replace": cfg.optional("first_k_dense_replace", 0),
            "num_nextn_predict_layers": cfg.optional("num_nextn_predict_layers", 0)}


# Qwen3-Next always gates attention output; it is not a config key there (Qwen3.5 spells it out).
FAMILIES: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "llama": _llama, "qwen3": _qwen3, "qwen3_moe": lambda c: {**_qwen3(c), **_qwen_moe(c)},
    "qwen3_next": lambda c: {**_qwen3(c), **_qwen_moe(c), **_hybrid(c), "attn_output_gate": True},
    "qwen3_5_text": _qwen3_5, "qwen3_5_moe_text": _qwen3_5, "deepseek_v3": _deepseek_v3,
}
# model_type values `kvplan models import` understands (outer names of nested configs included).
SUPPORTED_MODEL_TYPES = sorted([*FAMILIES, *NESTED_TEXT_TYPES])


def _text_config(config: Mapping[str, Any], where: str) -> _Config:
    outer_type = config.get("model_type")
    text = config.get("text_config")
    if isinstance(text, Mapping):
        inner_type = str(text.get("model_type") or f"{outer_type}_text")
        cfg = _Config(text, config, where, "text_config.", inner_type)
    else:
        cfg = _Config(config, config, where, "", str(outer_type))
    if cfg.model_type not in FAMILIES:
        raise DataFileError(f"{where}: {cfg.prefix}model_type: unsupported (got {cfg.model_type!r}, "
                            f"expected one of {', '.join(SUPPORTED_MODEL_TYPES)})")
    return cfg


def attention_kind(fields: Mapping[str, Any], *, model_type: str) -> str:
    """Card `attention`: mla (DeepSeek); hybrid with linear-attention layers; else mha/gqa by head counts."""
    if model_type == "deepseek_v3":
        return "mla"
    layer_types = fields.get("layer_types")
    if fields.get("linear_num_key_heads") and ("linear_attention" in (layer_types or ["linear_attention"])):
        return "hybrid"
    return "mha" if fields["num_attention_heads"] == fields["num_key_value_heads"] else "gqa"


def card_from_config_dict(config: Mapping[str, Any], *, card_id: str, origin: str = "config.json",
                          imported_on: str | None = None) -> ModelCard:
    """A validated ModelCard from a Hugging Face config dict; errors name `origin` and the config field.

    origin names the file in messages and in `sources`; imported_on (ISO date) defaults to today.
    """
    cfg = _text_config(config, origin)
    fields = FAMILIES[cfg.model_type](cfg)
    attention = attention_kind(fields, model_type=cfg.model_type)
    if attention != "hybrid":
        fields = {k: v for k, v in fields.items() if not k.startswith("linear_") and k not in (
            "layer_types", "full_attention_interval")}
    date = imported_on or datetime.date.today().isoformat()
    hf_repo = str(config.get("_name_or_path") or "local")
    sources: list[dict[str, Any]] = [
        {"ref": f"{origin} (imported by kvplan {__version__} on {date})", "confidence": "P"}]
    if cfg.derived:
        sources.append({"ref": "kvplan models import: values not in config.json", "confidence": "D",
                        "fields": sorted(cfg.derived), "note": "; ".join(cfg.derived.values())})
    raw_card = {"id": card_id, "name": hf_repo.rstrip("/").split("/")[-1] if hf_repo != "local" else card_id,
                "source": {"hf_repo": hf_repo}, "sources": sources, "model_type": cfg.model_type,
                "attention": attention, **{k: v for k, v in fields.items() if v is not None}}
    try:
        return ModelCard.model_validate(raw_card)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        where = f"{cfg.prefix}{loc}: " if loc.split(".")[0] in fields else f"{loc}: " if loc else ""
        got = "" if isinstance(first.get("input"), dict) else f" (got {first.get('input')!r})"
        raise DataFileError(f"{origin}: {where}{first['msg'].removeprefix('Value error, ')}{got}") from exc


def card_yaml(card: ModelCard) -> str:
    """The card as YAML in schema field order, without defaulted fields (schema_version kept)."""
    dumped = card.model_dump(mode="json", exclude_defaults=True)
    always = {"schema_version": card.schema_version, "torch_dtype": card.torch_dtype,
              "attention_bias": card.attention_bias}
    ordered = {k: dumped.get(k, always.get(k)) for k in ModelCard.model_fields if k in dumped or k in always}
    return str(yaml.safe_dump(ordered, sort_keys=False, default_flow_style=None, width=110))


class TensorTotals(Frozen):
    """Tensors, parameters (elements) and exact stored bytes of a set of tensors."""

    tensors: int = 0
    parameters: int = 0
    weight_bytes: int = 0


class TensorEntry(Frozen):
    """One tensor of a safetensors header: dtype name, shape, [begin, end) byte offsets in the data block."""

    dtype: str
    shape: list[int]
    data_offsets: tuple[int, int]


def safetensors_header(path: Path) -> dict[str, TensorEntry]:
    """The tensors of one safetensors file, from its header alone (no tensor data is read).

    Layout: u64 little-endian N, N bytes of JSON {name: {dtype, shape, data_offsets}} (and __metadata__),
    then the data block; the file must be long enough to reach every tensor's end offset.
    """
    with path.open("rb") as f:
        prefix = f.read(HEADER_LENGTH_BYTES)
        if prefix == b"version ":  # "version https://git-lfs.github.com/spec/v1 ..."
            raise DataFileError(f"{path}: a Git LFS pointer, not weights (got a pointer file, expected "
                                f"safetensors); run `git lfs pull` or download the file")
        if len(prefix) < HEADER_LENGTH_BYTES:
            raise DataFileError(f"{path}: not a safetensors file (got {len(prefix)} bytes, expected >= 8)")
        header_bytes = int.from_bytes(prefix, "little")
        if header_bytes > MAX_HEADER_BYTES:
            raise DataFileError(f"{path}: implausible header length (got {header_bytes}, expected <= "
                                f"{MAX_HEADER_BYTES}); not a safetensors file?")
        raw = f.read(header_bytes)
    try:
        header = json.loads(raw.decode("utf-8"))
        if not isinstance(header, dict):
            raise TypeError(f"got a JSON {type(header).__name__}")
        header.pop("__metadata__", None)
        entries = {name: TensorEntry.model_validate(entry) for name, entry in header.items()}
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
        raise DataFileError(f"{path}: header is not a JSON object ({exc}); not a safetensors file?") from exc
    except ValidationError as exc:
        raise DataFileError(f"{path}: malformed tensor entry ({exc.errors()[0]['msg']}; expected dtype, "
                            f"shape and data_offsets [begin, end])") from exc
    data_end = max((e.data_offsets[1] for e in entries.values()), default=0)
    needed = HEADER_LENGTH_BYTES + header_bytes + data_end
    if path.stat().st_size < needed:
        raise DataFileError(f"{path}: file is truncated (got {path.stat().st_size} bytes, expected >= "
                            f"{needed}); incomplete download?")
    return entries


def tensor_group(name: str, *, num_hidden_layers: int) -> str:
    """Which part of the checkpoint a tensor belongs to: scale, vision, mtp or text.

    mtp: names under `mtp.` (Qwen) or decoder layers with index >= num_hidden_layers (DeepSeek's layer 61).
    """
    parts = name.split(".")
    if parts[-1] in SCALE_SUFFIXES:
        return "scale"
    if any(part in VISION_PARTS for part in parts):
        return "vision"
    layer = _LAYER_RE.search(name)
    beyond_decoder = layer is not None and int(layer.group(1)) >= num_hidden_layers
    return "mtp" if parts[0] == "mtp" or ".mtp." in name or beyond_decoder else "text"


class CheckpointSummary(Frozen):
    """Totals over every *.safetensors file of a directory, from headers only."""

    files: list[str]
    by_dtype: dict[str, TensorTotals]
    by_group: dict[str, TensorTotals]
    missing_shards: list[str] = Field(default_factory=list)

    def group(self, name: str) -> TensorTotals:
        """Totals of one group (text, mtp, vision, scale); zeros when the checkpoint has none."""
        return self.by_group.get(name, TensorTotals())

def _add(totals: dict[str, TensorTotals], key: str, *, parameters: int, weight_bytes: int) -> None:
    old = totals.get(key, TensorTotals())
    totals[key] = TensorTotals(tensors=old.tensors + 1, parameters=old.parameters + parameters,
                               weight_bytes=old.weight_bytes + weight_bytes)


def checkpoint_summary(directory: Path, *, num_hidden_layers: int) -> CheckpointSummary | None:
    """Per-dtype and per-group totals of the safetensors files in `directory`; None when there are none."""
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        return None
    by_dtype: dict[str, TensorTotals] = {}
    by_group: dict[str, TensorTotals] = {}
    for path in files:
        for name, entry in safetensors_header(path).items():
            elements = math.prod(entry.shape)
            stored = entry.data_offsets[1] - entry.data_offsets[0]
            _add(by_dtype, entry.dtype, parameters=elements, weight_bytes=stored)
            _add(by_group, tensor_group(name, num_hidden_layers=num_hidden_layers),
                 parameters=elements, weight_bytes=stored)
    return CheckpointSummary(files=[p.name for p in files], by_dtype=by_dtype, by_group=by_group,
                             missing_shards=_missing_shards(directory, present={p.name for p in files}))


def _missing_shards(directory: Path, *, present: set[str]) -> list[str]:
    index = directory / "model.safetensors.index.json"
    if not index.is_file():
        return []
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
    except (OSError, ValueError, AttributeError) as exc:
        raise DataFileError(f"{index}: not a readable safetensors index ({exc})") from exc
    return sorted(set(weight_map.values()) - present)


class ParameterCheck(Frozen):
    """The card's computed parameter count set against the checkpoint's text-decoder tensors."""

    geometry_parameters: int
    checkpoint_parameters: int
    geometry_mtp_parameters: int
    checkpoint_mtp_parameters: int

    @property
    def difference_parameters(self) -> int:
        """checkpoint - geometry (text decoder, MTP excluded); 0 when the card matches the weights."""
        return self.checkpoint_parameters - self.geometry_parameters


def parameter_check(card: ModelCard, summary: CheckpointSummary) -> ParameterCheck:
    """Compare params.parameter_count(card) with the checkpoint's text (and MTP) parameters."""
    geometry = params.parameter_count(card)
    return ParameterCheck(
        geometry_parameters=geometry,
        checkpoint_parameters=summary.group("text").parameters,
        geometry_mtp_parameters=params.parameter_count(card, include_mtp=True) - geometry,
        checkpoint_mtp_parameters=summary.group("mtp").parameters,
    )


def config_path_of(path: Path) -> Path:
    """`path` itself when it is a file, else `path`/config.json; DataFileError when neither exists."""
    candidate = path / "config.json" if path.is_dir() else path
    if not candidate.is_file():
        raise DataFileError(f"{candidate}: config file not found (got {str(path)!r}, expected a directory "
                            f"holding config.json, or the config.json file itself)")
    return candidate


def read_config(path: Path) -> dict[str, Any]:
    """Parse a config.json into a dict; DataFileError names the file."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read file ({exc.strerror})") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFileError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise DataFileError(f"{path}: expected a JSON object at the top level (got {type(config).__name__})")
    return config
