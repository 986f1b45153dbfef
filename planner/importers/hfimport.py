"""Hugging Face config.json -> ModelCard (offline).

`card_from_config_dict` maps a config dict (Qwen3, Qwen3-MoE, Qwen3-Next, Qwen3.5, Llama, DeepSeek-V3 and
Kimi-K2, MiniMax-M2) onto the card schema, names unchanged where the card has them (DeepSeek-V3.2's indexer
keys are not carried; MiniMax-M2's expert keys are renamed, see _minimax_m2). Checkpoint evidence
(safetensors headers) lives in planner/importers/checkpoint.py and is re-exported here.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from planner import __version__, readers
from planner.errors import DataFileError
from planner.schema import ATTENTION_KINDS, AttentionKind, ModelCard

CARD_ID_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")  # as ModelCard.id
# Outer model_type of multimodal configs whose text model sits under "text_config".
NESTED_TEXT_TYPES = ("qwen3_5", "qwen3_5_moe", "kimi_k25")
# model_type values whose attention is DeepSeek MLA (Kimi-K2 is the DeepSeek-V3 architecture).
MLA_MODEL_TYPES = ("deepseek_v3", "deepseek_v32", "kimi_k2")
MINIMAX_FULL_ATTENTION = 1  # MiniMax attn_type_list: 1 = softmax attention; 0 = MiniMax-01's lightning


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
            raise DataFileError(
                f"{self.where}: {self.prefix}{key}: required field missing "
                f"(got nothing, expected a value for model_type {self.model_type!r})"
            )
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
            raise DataFileError(
                f"{self.where}: {self.prefix}{key}: not supported by the card schema "
                f"(got {value!r}, expected {expected!r})"
            )


def _base_fields(cfg: _Config) -> dict[str, Any]:
    heads = cfg.required("num_attention_heads")
    dtype = next((m[k] for m in (cfg.raw, cfg.outer) for k in ("torch_dtype", "dtype") if m.get(k)), None)
    return {
        "torch_dtype": dtype or cfg.defaulted("torch_dtype", "bfloat16", why="absent from config.json"),
        "hidden_size": cfg.required("hidden_size"),
        "num_hidden_layers": cfg.required("num_hidden_layers"),
        "num_attention_heads": heads,
        "num_key_value_heads": cfg.defaulted(
            "num_key_value_heads", heads, why="absent: transformers then uses num_attention_heads"
        ),
        "vocab_size": cfg.required("vocab_size"),
        "tie_word_embeddings": cfg.defaulted(
            "tie_word_embeddings", False, why="absent: the transformers default for this model_type"
        ),
        "max_position_embeddings": cfg.required("max_position_embeddings"),
        "attention_bias": cfg.optional("attention_bias", False),
    }


def _llama(cfg: _Config) -> dict[str, Any]:
    cfg.must_equal("mlp_bias", False)
    fields = {**_base_fields(cfg), "intermediate_size": cfg.required("intermediate_size")}
    head_dim = cfg.optional("head_dim")
    if head_dim is None:
        hidden, heads = fields["hidden_size"], fields["num_attention_heads"]
        for key, value in (("hidden_size", hidden), ("num_attention_heads", heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise DataFileError(
                    f"{cfg.where}: {cfg.prefix}{key}: must be a whole number > 0 (got {value!r})"
                )
        if hidden % heads:
            raise DataFileError(
                f"{cfg.where}: head_dim: absent and hidden_size is not a multiple of "
                f"num_attention_heads (got {hidden} and {heads})"
            )
        head_dim = hidden // heads
        cfg.derived["head_dim"] = f"head_dim = hidden_size / num_attention_heads = {head_dim} (absent)"
    return {**fields, "head_dim": head_dim}


def _qwen2(cfg: _Config) -> dict[str, Any]:
    """Qwen2 / Qwen2.5: Llama geometry with q/k/v biases, which transformers always builds (not a key)."""
    cfg.must_equal("use_sliding_window", False)
    cfg.derived["attention_bias"] = "attention_bias = True (Qwen2 always has q/k/v biases; not a config key)"
    return {**_llama(cfg), "attention_bias": True}


def _mistral(cfg: _Config) -> dict[str, Any]:
    """Mistral: Llama geometry (head_dim may be given, as Mistral-Nemo's 128 with hidden 5120 / 32 heads).

    A sliding_window is recorded, not modelled: kvplan caches every token of --ctx, which over-states the KV
    of a windowed model beyond the window (the safe side for capacity)."""
    window = cfg.optional("sliding_window")
    if window is not None:
        cfg.derived["sliding_window"] = (
            f"sliding_window {window} not modelled: KV counted for the whole context (over-states it beyond "
            f"{window} tokens)"
        )
    return _llama(cfg)


def _qwen3(cfg: _Config) -> dict[str, Any]:
    fields = {**_base_fields(cfg), "head_dim": cfg.required("head_dim"), "qk_norm": True}
    if "num_experts" in cfg.raw and "intermediate_size" not in cfg.raw:
        # Every layer is MoE (checked in _qwen_moe), so the dense width is never used; the schema needs one.
        fields["intermediate_size"] = cfg.required("moe_intermediate_size")
        cfg.derived["intermediate_size"] = (
            "intermediate_size = moe_intermediate_size (absent and unused: "
            "every layer is MoE; placeholder the schema requires)"
        )
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
        raise DataFileError(
            f"{cfg.where}: {cfg.prefix}layer_types: required field missing (got neither "
            f"layer_types nor full_attention_interval, expected one for {cfg.model_type!r})"
        )
    layer_types = cfg.optional("layer_types")
    known = ("full_attention", "linear_attention")
    if layer_types is not None and (
        not isinstance(layer_types, list) or not all(isinstance(t, str) and t in known for t in layer_types)
    ):
        raise DataFileError(
            f"{cfg.where}: {cfg.prefix}layer_types: not a list of layer kinds "
            f"(got {str(layer_types)[:80]!r}, "
            f"expected a list of {' / '.join(known)}); refusing to import a hybrid model as plain attention"
        )
    fields = {
        key: cfg.required(key)
        for key in (
            "linear_conv_kernel_dim",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_num_key_heads",
            "linear_num_value_heads",
        )
    }
    rope = cfg.optional("rope_parameters", {})  # Qwen3.5 nests it there, Qwen3-Next keeps it top-level
    partial = cfg.optional(
        "partial_rotary_factor", rope.get("partial_rotary_factor") if isinstance(rope, dict) else None
    )
    return {
        **fields,
        "layer_types": cfg.optional("layer_types"),
        "full_attention_interval": cfg.optional("full_attention_interval"),
        **({"partial_rotary_factor": partial} if partial is not None else {}),
    }


def _qwen3_5(cfg: _Config) -> dict[str, Any]:
    fields = {
        **_qwen3(cfg),
        **_hybrid(cfg),
        "attn_output_gate": cfg.defaulted("attn_output_gate", True, why="absent: always on in Qwen3.5"),
        "mtp_num_hidden_layers": cfg.optional("mtp_num_hidden_layers", 0),
        "mamba_ssm_dtype": cfg.optional("mamba_ssm_dtype"),
    }
    if "num_experts" in cfg.raw:
        fields.update(_qwen_moe(cfg))
    return fields


def _deepseek_v3(cfg: _Config) -> dict[str, Any]:
    cfg.must_equal("moe_layer_freq", 1)
    fields = {**_base_fields(cfg), "intermediate_size": cfg.required("intermediate_size")}
    for key in (
        "kv_lora_rank",
        "qk_rope_head_dim",
        "qk_nope_head_dim",
        "v_head_dim",
        "n_routed_experts",
        "num_experts_per_tok",
        "moe_intermediate_size",
    ):
        fields[key] = cfg.required(key)
    return {
        **fields,
        "q_lora_rank": cfg.optional("q_lora_rank"),
        "n_shared_experts": cfg.optional("n_shared_experts") or None,
        "first_k_dense_replace": cfg.optional("first_k_dense_replace", 0),
        "num_nextn_predict_layers": cfg.optional("num_nextn_predict_layers", 0),
    }


def _minimax_m2(cfg: _Config) -> dict[str, Any]:
    """MiniMax-M2 / M2.5 / M2.7: full-attention GQA, q/k norms, every layer a routed MoE, no shared expert.
    num_local_experts (expert count) and intermediate_size (each expert's width) are renamed; MTP modules
    are not carried (the released safetensors hold none: minimax-m2.5 card)."""
    if any(kind != MINIMAX_FULL_ATTENTION for kind in cfg.optional("attn_type_list", [])):
        raise DataFileError(
            f"{cfg.where}: {cfg.prefix}attn_type_list: not supported by the card schema (got a layer "
            f"kind other than {MINIMAX_FULL_ATTENTION} = full attention; lightning attention is not modelled)"
        )
    cfg.must_equal("shared_intermediate_size", 0)
    expert_width = cfg.required("intermediate_size")
    fields = {
        **_base_fields(cfg),
        "head_dim": cfg.required("head_dim"),
        "qk_norm": bool(cfg.optional("use_qk_norm", False)),
        "num_experts": cfg.required("num_local_experts"),
        "num_experts_per_tok": cfg.required("num_experts_per_tok"),
        "moe_intermediate_size": expert_width,
        "intermediate_size": expert_width,
    }
    cfg.derived["num_experts"] = "num_experts = num_local_experts (MiniMax's name for the expert count)"
    cfg.derived["moe_intermediate_size"] = (
        "moe_intermediate_size = intermediate_size (MiniMax's intermediate_size is each expert's width); "
        "intermediate_size kept as the placeholder the schema requires (every layer is MoE, so unused)"
    )
    if fields["qk_norm"] and cfg.optional("qk_norm_type") == "per_layer":
        cfg.derived["qk_norm"] = (
            "qk_norm = True for use_qk_norm with qk_norm_type per_layer: one RMSNorm over all heads, "
            "(H_q + H_kv) x head_dim weights a layer where the card counts 2 x head_dim (~2e-6 of the total)"
        )
    if cfg.optional("use_mtp") and cfg.optional("num_mtp_modules"):
        modules = cfg.optional("num_mtp_modules")
        cfg.derived["mtp_num_hidden_layers"] = f"num_mtp_modules {modules} not carried: no MTP weights ship"
    return fields


# Qwen3-Next always gates attention output; it is not a config key there (Qwen3.5 spells it out).
FAMILIES: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _mistral,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "qwen3_moe": lambda c: {**_qwen3(c), **_qwen_moe(c)},
    "qwen3_next": lambda c: {**_qwen3(c), **_qwen_moe(c), **_hybrid(c), "attn_output_gate": True},
    "qwen3_5_text": _qwen3_5,
    "qwen3_5_moe_text": _qwen3_5,
    "deepseek_v3": _deepseek_v3,
    # V3.2 = V3 geometry + a sparse-attention indexer (index_* keys: not in the card schema, see card notes).
    "deepseek_v32": _deepseek_v3,
    # Kimi-K2 / K2-Thinking (top level) and Kimi-K2.5 / K2.6 (text_config): DeepseekV3ForCausalLM geometry.
    "kimi_k2": _deepseek_v3,
    "minimax_m2": _minimax_m2,
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
        raise DataFileError(
            f"{where}: {cfg.prefix}model_type: unsupported (got {cfg.model_type!r}, "
            f"expected one of {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    return cfg


def attention_kind(fields: Mapping[str, Any], *, model_type: str) -> AttentionKind:
    """Card `attention`: mla (DeepSeek); hybrid with linear-attention layers; else mha/gqa by head counts."""
    if model_type in MLA_MODEL_TYPES:
        return "mla"
    layer_types = fields.get("layer_types")
    if fields.get("linear_num_key_heads") and ("linear_attention" in (layer_types or ["linear_attention"])):
        return "hybrid"
    return "mha" if fields["num_attention_heads"] == fields["num_key_value_heads"] else "gqa"


def card_from_config_dict(
    config: Mapping[str, Any], *, card_id: str, origin: str = "config.json", imported_on: str | None = None
) -> ModelCard:
    """A validated ModelCard from a Hugging Face config dict; errors name `origin` and the config field.

    origin names the file in messages and in `sources`; imported_on (ISO date) defaults to today.
    """
    cfg = _text_config(config, origin)
    fields = FAMILIES[cfg.model_type](cfg)
    attention = attention_kind(fields, model_type=cfg.model_type)
    if not ATTENTION_KINDS[attention].linear_layers:
        fields = {
            k: v
            for k, v in fields.items()
            if not k.startswith("linear_") and k not in ("layer_types", "full_attention_interval")
        }
    date = imported_on or datetime.date.today().isoformat()
    hf_repo = str(config.get("_name_or_path") or "local")
    sources: list[dict[str, Any]] = [
        {"ref": f"{origin} (imported by kvplan {__version__} on {date})", "confidence": "P"}
    ]
    if cfg.derived:
        sources.append(
            {
                "ref": "kvplan models import: values not in config.json",
                "confidence": "D",
                "fields": sorted(cfg.derived),
                "note": "; ".join(cfg.derived.values()),
            }
        )
    raw_card = {
        "id": card_id,
        "name": hf_repo.rstrip("/").split("/")[-1] if hf_repo != "local" else card_id,
        "source": {"hf_repo": hf_repo},
        "sources": sources,
        "model_type": cfg.model_type,
        "attention": attention,
        **{k: v for k, v in fields.items() if v is not None},
    }
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
    always = {
        "schema_version": card.schema_version,
        "torch_dtype": card.torch_dtype,
        "attention_bias": card.attention_bias,
    }
    ordered = {k: dumped.get(k, always.get(k)) for k in ModelCard.model_fields if k in dumped or k in always}
    return str(yaml.safe_dump(ordered, sort_keys=False, default_flow_style=None, width=110))


def config_path_of(path: Path) -> Path:
    """`path` itself when it is a file, else `path`/config.json; DataFileError when neither exists."""
    try:
        candidate = path / "config.json" if path.is_dir() else path
        found = candidate.is_file()
    except OSError as exc:  # a name too long for the file system (ENAMETOOLONG), a loop
        raise DataFileError(f"{str(path)[:200]}...: cannot read ({exc.strerror})") from exc
    if not found:
        raise DataFileError(
            f"{candidate}: config file not found (got {str(path)!r}, expected a directory "
            f"holding config.json, or the config.json file itself)"
        )
    return candidate


def default_card_id(config: Mapping[str, Any], *, fallback: str = "", default: str = "imported-model") -> str:
    """Kebab-case id from the last part of `_name_or_path` (else of `fallback`), else `default`."""
    name = str(config.get("_name_or_path") or fallback).rstrip("/").split("/")[-1]
    slug = re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-.")
    return slug or default


def read_config(path: Path) -> dict[str, Any]:
    """Parse a config.json into a dict; DataFileError names the file."""
    return readers.json_object(readers.read_text_capped(path), where=str(path))
