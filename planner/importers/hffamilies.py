"""The model families `kvplan models import` reads: each maps a Hugging Face text-model config onto card
fields (planner/importers/hfimport.py validates the card), names unchanged where the card has them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from planner.errors import DataFileError

# Outer model_type of multimodal configs whose text model sits under "text_config".
NESTED_TEXT_TYPES = ("qwen3_5", "qwen3_5_moe", "kimi_k25", "minimax_m3_vl")
# The text model_type of a nested config whose text_config names none (else "<outer>_text"): MiniMax-M3's
# Hub config leaves it out; transformers' MiniMaxM3VLConfig builds its text config as minimax_m3.
NESTED_TEXT_TYPE_OF = {"minimax_m3_vl": "minimax_m3"}
MINIMAX_FULL_ATTENTION = 1  # MiniMax attn_type_list: 1 = softmax attention; 0 = MiniMax-01's lightning


@dataclass
class TextConfig:
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

    def integer(self, key: str) -> int:
        """required(key) as a positive integer (an int, not a bool or a string); DataFileError otherwise."""
        value = self.required(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DataFileError(
                f"{self.where}: {self.prefix}{key}: expected an integer >= 1 (got {value!r:.80})"
            )
        return value

    def flags(self, key: str) -> list[int]:
        """required(key) as a list of 0 / 1 per layer (MiniMax's *_freq lists); DataFileError otherwise."""
        value = self.required(key)
        if not isinstance(value, list) or any(isinstance(f, bool) or f not in (0, 1) for f in value):
            raise DataFileError(
                f"{self.where}: {self.prefix}{key}: expected a list of 0 / 1 (got {value!r:.80})"
            )
        return [int(f) for f in value]

    def section(self, key: str) -> TextConfig:
        """The JSON object under `key`, read as its own TextConfig (errors name `prefix.key.field`)."""
        value = self.required(key)
        if not isinstance(value, Mapping):
            raise DataFileError(f"{self.where}: {self.prefix}{key}: expected an object (got {value!r:.80})")
        return TextConfig(
            value, self.outer, self.where, f"{self.prefix}{key}.", self.model_type, self.derived
        )

    def must_equal(self, key: str, expected: Any) -> None:
        """Reject a config feature the card schema cannot express."""
        value = self.raw.get(key)
        if value is not None and value != expected:
            raise DataFileError(
                f"{self.where}: {self.prefix}{key}: not supported by the card schema "
                f"(got {value!r}, expected {expected!r})"
            )


def _base_fields(cfg: TextConfig) -> dict[str, Any]:
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


def _llama(cfg: TextConfig) -> dict[str, Any]:
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


def _qwen2(cfg: TextConfig) -> dict[str, Any]:
    """Qwen2 / Qwen2.5: Llama geometry with q/k/v biases, which transformers always builds (not a key)."""
    cfg.must_equal("use_sliding_window", False)
    cfg.derived["attention_bias"] = "attention_bias = True (Qwen2 always has q/k/v biases; not a config key)"
    return {**_llama(cfg), "attention_bias": True}


def _mistral(cfg: TextConfig) -> dict[str, Any]:
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


def _qwen3(cfg: TextConfig) -> dict[str, Any]:
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


def _qwen_moe(cfg: TextConfig) -> dict[str, Any]:
    cfg.must_equal("decoder_sparse_step", 1)
    cfg.must_equal("mlp_only_layers", [])
    return {
        "num_experts": cfg.required("num_experts"),
        "num_experts_per_tok": cfg.required("num_experts_per_tok"),
        "moe_intermediate_size": cfg.required("moe_intermediate_size"),
        "shared_expert_intermediate_size": cfg.optional("shared_expert_intermediate_size") or None,
    }


def _hybrid(cfg: TextConfig) -> dict[str, Any]:
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


def _qwen3_5(cfg: TextConfig) -> dict[str, Any]:
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


def _deepseek_v3(cfg: TextConfig) -> dict[str, Any]:
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


def _deepseek_v32(cfg: TextConfig) -> dict[str, Any]:
    """DeepSeek-V3.2: V3 geometry plus the sparse-attention indexer (index_n_heads, index_head_dim,
    index_topk; vLLM builds the indexer when index_topk is present)."""
    indexer = {key: cfg.required(key) for key in ("index_n_heads", "index_head_dim", "index_topk")}
    return {**_deepseek_v3(cfg), **indexer}


def _minimax_m2(cfg: TextConfig) -> dict[str, Any]:
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


def _minimax_m3(cfg: TextConfig) -> dict[str, Any]:
    """MiniMax-M3: GQA with per-head q/k norms and MiniMax sparse attention (sparse_attention_config: one
    index key of sparse_index_dim per token, sparse_topk_blocks blocks of sparse_block_size tokens attended,
    sparse_attention_freq the sparse layers); dense MLPs (dense_intermediate_size) where moe_layer_freq is 0,
    then MoE experts of intermediate_size with shared experts. MTP modules are not carried (none ship)."""
    moe_freq = cfg.flags("moe_layer_freq")
    dense_first = next((i for i, f in enumerate(moe_freq) if f), len(moe_freq))
    if any(not f for f in moe_freq[dense_first:]):
        raise DataFileError(
            f"{cfg.where}: {cfg.prefix}moe_layer_freq: only leading dense layers are supported"
        )
    width, n_shared = cfg.integer("intermediate_size"), cfg.optional("n_shared_experts", 0)
    if cfg.optional("shared_intermediate_size", 0) != n_shared * width:
        raise DataFileError(
            f"{cfg.where}: {cfg.prefix}shared_intermediate_size: must be n_shared_experts x width"
        )
    cfg.derived["num_experts"] = "num_experts = num_local_experts; moe_intermediate_size = intermediate_size"
    cfg.derived["intermediate_size"] = "intermediate_size = dense_intermediate_size (the dense layers' MLP)"
    return {
        **_base_fields(cfg),
        "head_dim": cfg.required("head_dim"),
        "qk_norm": bool(cfg.optional("use_qk_norm", False)),
        "partial_rotary_factor": cfg.optional("partial_rotary_factor", 1.0),
        "intermediate_size": cfg.required("dense_intermediate_size"),
        "num_experts": cfg.required("num_local_experts"),
        "num_experts_per_tok": cfg.required("num_experts_per_tok"),
        "moe_intermediate_size": width,
        "n_shared_experts": n_shared or None,
        "first_k_dense_replace": dense_first,
        **_minimax_sparse_fields(cfg.section("sparse_attention_config")),
    }


def _minimax_sparse_fields(sparse: TextConfig) -> dict[str, Any]:
    """The index_* fields of MiniMax sparse attention; none when use_sparse_attention is false (every layer
    then attends densely)."""
    if sparse.optional("use_sparse_attention", True) is False:
        return {}
    topk_tokens = sparse.integer("sparse_topk_blocks") * sparse.integer("sparse_block_size")
    sparse.derived["index_topk"] = (
        f"index_topk = sparse_topk_blocks x sparse_block_size = {topk_tokens} tokens"
    )
    return {
        "index_n_heads": sparse.integer("sparse_num_index_heads"),
        "index_head_dim": sparse.integer("sparse_index_dim"),
        "index_topk": topk_tokens,
        "sparse_attention_freq": sparse.flags("sparse_attention_freq"),
    }


# Qwen3-Next always gates attention output; it is not a config key there (Qwen3.5 spells it out).
FAMILIES: dict[str, Callable[[TextConfig], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _mistral,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "qwen3_moe": lambda c: {**_qwen3(c), **_qwen_moe(c)},
    "qwen3_next": lambda c: {**_qwen3(c), **_qwen_moe(c), **_hybrid(c), "attn_output_gate": True},
    "qwen3_5_text": _qwen3_5,
    "qwen3_5_moe_text": _qwen3_5,
    "deepseek_v3": _deepseek_v3,
    "deepseek_v32": _deepseek_v32,
    # GLM-5 / 5.1 / 5.2 (GlmMoeDsaForCausalLM): DeepSeek-V3.2's MLA + sparse-attention indexer + MoE, with
    # wider heads (qk_nope 192, v 256) and 32 index heads; GLM-5.2's IndexShare keys are not carried.
    "glm_moe_dsa": _deepseek_v32,
    # Kimi-K2 / K2-Thinking (top level) and Kimi-K2.5 / K2.6 (text_config): DeepseekV3ForCausalLM geometry.
    "kimi_k2": _deepseek_v3,
    "minimax_m2": _minimax_m2,
    # MiniMax-M3 (MiniMaxM3SparseForCausalLM), top level or as the text_config of minimax_m3_vl
    "minimax_m3": _minimax_m3,
}
# model_type values `kvplan models import` understands (outer names of nested configs included).
SUPPORTED_MODEL_TYPES = sorted([*FAMILIES, *NESTED_TEXT_TYPES])


def text_model_config(config: Mapping[str, Any], where: str) -> TextConfig:
    """The text model's config (under "text_config" in a multimodal config) with its family checked;
    DataFileError naming `where` for a model_type no family reads."""
    outer_type = config.get("model_type")
    text = config.get("text_config")
    if text is not None and not isinstance(text, Mapping):
        raise DataFileError(
            f"{where}: text_config: not an object (got {type(text).__name__}, expected the text model's "
            "config as a JSON object)"
        )
    if isinstance(text, Mapping):
        fallback = NESTED_TEXT_TYPE_OF.get(str(outer_type), f"{outer_type}_text")
        inner_type = str(text.get("model_type") or fallback)
        cfg = TextConfig(text, config, where, "text_config.", inner_type)
    else:
        cfg = TextConfig(config, config, where, "", str(outer_type))
    if cfg.model_type not in FAMILIES:
        raise DataFileError(
            f"{where}: {cfg.prefix}model_type: unsupported (got {cfg.model_type!r}, "
            f"expected one of {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    return cfg
