"""`kvplan models import`: config.json -> ModelCard, safetensors headers -> exact bytes, and the CLI.

Fake checkpoints are built in tmp_path: config.json files shaped like the released ones, and tiny
safetensors files with real headers (u64 little-endian length + JSON, then zero-filled data).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from planner import catalog, params
from planner.cli import app
from planner.errors import DataFileError
from planner.importers import checkpoint, hfimport
from planner.schema import ModelCard
from tests.helpers import GEOMETRY_KEYS

runner = CliRunner()
Tensors = dict[str, tuple[str, list[int]]]
DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I32": 4}

# --- fixtures: configs shaped like the released config.json files ------------------------------------

QWEN3_0_6B = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 40960,
    "max_window_layers": 28,
    "model_type": "qwen3",
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
    "_name_or_path": "Qwen/Qwen3-0.6B",
}
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "attention_bias": False,
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "mlp_only_layers": [],
    "moe_intermediate_size": 768,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
}
QWEN3_NEXT_80B = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "decoder_sparse_step": 1,
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_size": 2048,
    "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "max_position_embeddings": 262144,
    "mlp_only_layers": [],
    "moe_intermediate_size": 512,
    "num_attention_heads": 16,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "num_hidden_layers": 48,
    "num_key_value_heads": 2,
    "partial_rotary_factor": 0.25,
    "shared_expert_intermediate_size": 512,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
}
QWEN3_5_27B = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "tie_word_embeddings": False,  # only at the top level: the importer must look there too
    "text_config": {
        "model_type": "qwen3_5_text",
        "attn_output_gate": True,
        "dtype": "bfloat16",
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_size": 5120,
        "intermediate_size": 17408,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 16,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 48,
        "linear_value_head_dim": 128,
        "mamba_ssm_dtype": "float32",
        "max_position_embeddings": 262144,
        "mtp_num_hidden_layers": 1,
        "num_attention_heads": 24,
        "num_hidden_layers": 64,
        "num_key_value_heads": 4,
        "vocab_size": 248320,
    },
    "vision_config": {"model_type": "qwen3_5_vision", "depth": 27, "hidden_size": 1152},
}
QWEN3_5_TEXT: dict[str, Any] = QWEN3_5_27B["text_config"]  # type: ignore[assignment]
LLAMA_3_1_8B = {  # the released config has no head_dim key
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "attention_bias": False,
    "first_k_dense_replace": 3,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "topk_group": 4,
    "torch_dtype": "bfloat16",
    "v_head_dim": 128,
    "vocab_size": 129280,
}


def write_safetensors(path: Path, tensors: Tensors) -> None:
    """A real safetensors file: header {name: {dtype, shape, data_offsets}} padded to 8 bytes, zero data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * DTYPE_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(offset))


def write_checkpoint(root: Path, config: dict[str, Any], shards: list[Tensors]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for i, tensors in enumerate(shards, start=1):
        write_safetensors(root / f"model-{i:05d}-of-{len(shards):05d}.safetensors", tensors)
    return root


# Tiny Llama: H=16, 4 heads x hd 4 (head_dim absent -> 16/4), 2 KV heads, I=32, V=64, L=2, untied head.
TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 16,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 32,
    "vocab_size": 64,
    "num_hidden_layers": 2,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "_name_or_path": "acme/Tiny-Llama",
}


TINY_LLAMA_LAYER = {  # HF Llama tensor names of one decoder layer -> shape
    "self_attn.q_proj.weight": [16, 16],
    "self_attn.k_proj.weight": [8, 16],
    "self_attn.v_proj.weight": [8, 16],
    "self_attn.o_proj.weight": [16, 16],
    "mlp.gate_proj.weight": [32, 16],
    "mlp.up_proj.weight": [32, 16],
    "mlp.down_proj.weight": [16, 32],
    "input_layernorm.weight": [16],
    "post_attention_layernorm.weight": [16],
}


def tiny_llama_tensors(layers: range) -> Tensors:
    return {
        f"model.layers.{i}.{name}": ("BF16", shape)
        for i in layers
        for name, shape in TINY_LLAMA_LAYER.items()
    }


# Per layer: q 256 + k 128 + v 128 + o 256 + mlp 3*512 + norms 32 = 2336; x2 layers = 4672;
# embed 64*16 = 1024, lm_head 1024, final norm 16: total 6736 parameters, 13472 bytes in BF16.
TINY_LLAMA_PARAMETERS = 6736


def tiny_llama_checkpoint(root: Path) -> Path:
    shard1 = {"model.embed_tokens.weight": ("BF16", [64, 16]), **tiny_llama_tensors(range(1))}
    shard2 = {
        **tiny_llama_tensors(range(1, 2)),
        "model.norm.weight": ("BF16", [16]),
        "lm_head.weight": ("BF16", [64, 16]),
    }
    return write_checkpoint(root, TINY_LLAMA, [shard1, shard2])


# --- config.json -> card --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "catalog_id"),
    [
        (QWEN3_0_6B, "qwen3-0.6b"),
        (QWEN3_30B_A3B, "qwen3-30b-a3b"),
        (QWEN3_NEXT_80B, "qwen3-next-80b-a3b"),
        (QWEN3_5_27B, "qwen3.5-27b"),
        (LLAMA_3_1_8B, "llama-3.1-8b"),
        (DEEPSEEK_V3, "deepseek-v3"),
    ],
)
def test_import_reproduces_catalogued_geometry(config: dict[str, Any], catalog_id: str) -> None:
    imported = hfimport.card_from_config_dict(config, card_id=catalog_id, imported_on="2025-01-01")
    committed = catalog.load_model(catalog_id)
    for key in GEOMETRY_KEYS:
        assert getattr(imported, key) == getattr(committed, key), key
    assert imported.resolved_layer_types == committed.resolved_layer_types
    assert params.parameter_count(imported) == params.parameter_count(committed)


def test_attention_kinds() -> None:
    mha = hfimport.card_from_config_dict({**TINY_LLAMA, "num_key_value_heads": 4}, card_id="t")
    assert mha.attention == "mha"
    assert hfimport.card_from_config_dict(TINY_LLAMA, card_id="t").attention == "gqa"
    assert hfimport.card_from_config_dict(DEEPSEEK_V3, card_id="t").attention == "mla"
    assert hfimport.card_from_config_dict(QWEN3_NEXT_80B, card_id="t").attention == "hybrid"


def test_qwen3_5_takes_text_config_and_keeps_its_fields() -> None:
    card = hfimport.card_from_config_dict(QWEN3_5_27B, card_id="qwen3.5-27b")
    assert card.model_type == "qwen3_5_text"
    assert (card.mtp_num_hidden_layers, card.mamba_ssm_dtype) == (1, "float32")
    assert card.layer_types is not None and card.layer_types.count("full_attention") == 16
    assert card.full_attention_interval == 4 and card.attn_output_gate and card.qk_norm
    assert card.tie_word_embeddings is False and card.source.hf_repo == "local"


def test_a_multimodal_config_marks_its_vision_tower_uncounted_and_the_plan_says_so() -> None:
    """A config whose text model sits under text_config (or beside a vision_config) imports as the text
    decoder with vision_tower_uncounted, written to the card's YAML; a text-only config does not. The plan of
    such a card names the uncounted tower in a note; the plan of a text-only card does not."""
    import json

    from typer.testing import CliRunner

    from planner.cli import app

    card = hfimport.card_from_config_dict(QWEN3_5_27B, card_id="qwen3.5-27b")
    assert card.vision_tower_uncounted and "vision_tower_uncounted: true" in hfimport.card_yaml(card)
    beside = hfimport.card_from_config_dict({**TINY_LLAMA, "vision_config": {"depth": 2}}, card_id="t")
    assert beside.vision_tower_uncounted
    plain = hfimport.card_from_config_dict(TINY_LLAMA, card_id="t")
    assert not plain.vision_tower_uncounted and "vision_tower" not in hfimport.card_yaml(plain)
    runner = CliRunner()
    for model, expected in (("qwen3-27b", True), ("qwen3-32b", False)):
        plan = json.loads(runner.invoke(app, ["-m", model, "--dtype", "fp8", "--json"]).stdout)
        assert any("vision tower" in note for note in plan["warnings"]) is expected, model


def test_qwen3_5_moe_without_intermediate_size_gets_a_documented_placeholder() -> None:
    text = {
        **QWEN3_5_TEXT,
        "model_type": "qwen3_5_moe_text",
        "num_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
    }
    del text["intermediate_size"]
    card = hfimport.card_from_config_dict(
        {**QWEN3_5_27B, "model_type": "qwen3_5_moe", "text_config": text}, card_id="q"
    )
    assert card.is_moe and card.moe_layers == card.num_hidden_layers
    assert card.intermediate_size == 512
    derived = card.sources[1]
    assert derived.confidence == "D" and "intermediate_size" in derived.fields


def test_llama_head_dim_is_derived_written_and_recorded() -> None:
    card = hfimport.card_from_config_dict(LLAMA_3_1_8B, card_id="llama-3.1-8b", imported_on="2025-01-01")
    assert card.head_dim == 128  # 4096 / 32
    text = hfimport.card_yaml(card)
    assert "\nhead_dim: 128\n" in text
    assert card.sources[0].confidence == "P"
    assert card.sources[0].ref.startswith("config.json (imported by kvplan ")
    assert card.sources[0].ref.endswith(" on 2025-01-01)")
    assert card.sources[1].fields == ["head_dim"]
    assert ModelCard.model_validate(yaml.safe_load(text)) == card


# Released config.json files (Hugging Face), and the parameter totals their safetensors index reports.
QWEN2_5_7B = {
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_sliding_window": False,
    "vocab_size": 152064,
    "_name_or_path": "Qwen/Qwen2.5-7B-Instruct",
}
MISTRAL_7B_V0_3 = {
    "architectures": ["MistralForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mistral",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 32768,
}


@pytest.mark.parametrize(
    ("config", "parameters", "bias"),
    [(QWEN2_5_7B, 7_615_616_512, True), (MISTRAL_7B_V0_3, 7_248_023_552, False)],
)
def test_qwen2_and_mistral_import_with_the_released_parameter_count(
    config: dict[str, Any], parameters: int, bias: bool
) -> None:
    """Issue 12: `kvplan models import` took only llama/qwen3/deepseek; Qwen2 adds q/k/v biases."""
    card = hfimport.card_from_config_dict(config, card_id="t")
    assert (card.model_type, card.attention_bias, card.head_dim) == (config["model_type"], bias, 128)
    assert params.parameter_count(card) == parameters


def test_a_sliding_window_is_recorded_not_modelled() -> None:
    card = hfimport.card_from_config_dict({**MISTRAL_7B_V0_3, "sliding_window": 4096}, card_id="t")
    assert "sliding_window 4096 not modelled" in card.sources[-1].note
    with pytest.raises(DataFileError, match=r"use_sliding_window: not supported .*\(got True"):
        hfimport.card_from_config_dict({**QWEN2_5_7B, "use_sliding_window": True}, card_id="t")


def test_name_or_path_becomes_hf_repo() -> None:
    card = hfimport.card_from_config_dict(QWEN3_0_6B, card_id="qwen3-0.6b")
    assert card.source.hf_repo == "Qwen/Qwen3-0.6B" and card.name == "Qwen3-0.6B"


def test_unknown_model_type_names_file_type_and_supported_list() -> None:
    with pytest.raises(
        DataFileError,
        match=r"^ckpt/config\.json: model_type: unsupported \(got 'gpt_neox', "
        r"expected one of .*deepseek_v3.*llama.*mistral.*qwen2.*qwen3_next",
    ):
        hfimport.card_from_config_dict(
            {**TINY_LLAMA, "model_type": "gpt_neox"}, card_id="t", origin="ckpt/config.json"
        )


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({k: v for k, v in TINY_LLAMA.items() if k != "vocab_size"}, "vocab_size"),
        ({k: v for k, v in QWEN3_0_6B.items() if k != "head_dim"}, "head_dim"),
        ({k: v for k, v in DEEPSEEK_V3.items() if k != "kv_lora_rank"}, "kv_lora_rank"),
        (
            {**QWEN3_5_27B, "text_config": {k: v for k, v in QWEN3_5_TEXT.items() if k != "hidden_size"}},
            "text_config.hidden_size",
        ),
    ],
)
def test_missing_required_field_names_file_and_field(config: dict[str, Any], field: str) -> None:
    with pytest.raises(DataFileError, match=rf"^x/config\.json: {field}: required field missing"):
        hfimport.card_from_config_dict(config, card_id="t", origin="x/config.json")


def test_features_the_schema_cannot_express_are_rejected() -> None:
    with pytest.raises(
        DataFileError,
        match=r"^config\.json: decoder_sparse_step: not supported .*\(got 2, "
        r"expected 1\)",
    ):
        hfimport.card_from_config_dict({**QWEN3_30B_A3B, "decoder_sparse_step": 2}, card_id="t")


def test_schema_violations_are_reported_with_the_config_field() -> None:
    with pytest.raises(DataFileError, match=r"^config\.json: num_attention_heads must be a multiple"):
        hfimport.card_from_config_dict({**TINY_LLAMA, "num_key_value_heads": 3, "head_dim": 4}, card_id="t")


def test_hfimport_imports_nothing_heavy() -> None:
    code = "import sys\nfrom planner.importers import hfimport\nprint(' '.join(sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = run.stdout.split()
    assert [m for m in ("torch", "safetensors", "typer", "rich", "streamlit", "plotly") if m in loaded] == []


# --- safetensors headers --------------------------------------------------------------------------------


def test_tiny_llama_checkpoint_matches_the_geometry_exactly(tmp_path: Path) -> None:
    root = tiny_llama_checkpoint(tmp_path / "tiny")
    card = hfimport.card_from_config_dict(TINY_LLAMA, card_id="tiny")
    summary = checkpoint.checkpoint_summary(root, num_hidden_layers=card.num_hidden_layers)
    assert summary is not None
    assert summary.files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    bf16 = summary.by_dtype["BF16"]
    # 2 layers x 9 tensors + embedding, final norm, lm_head = 21 tensors; BF16 = 2 bytes each
    assert (bf16.tensors, bf16.parameters, bf16.weight_bytes) == (21, TINY_LLAMA_PARAMETERS, 2 * 6736)
    check = checkpoint.parameter_check(card, summary)
    assert check.geometry_parameters == check.checkpoint_parameters == TINY_LLAMA_PARAMETERS
    assert check.difference_parameters == 0


def test_header_reader_ignores_tensor_data(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    write_safetensors(path, {"a": ("F32", [3, 5]), "b": ("BF16", [7])})
    header = checkpoint.safetensors_header(path)
    assert header["a"].shape == [3, 5] and header["a"].data_offsets == (0, 60)
    assert header["b"].dtype == "BF16" and header["b"].data_offsets == (60, 74)


def test_groups_split_mtp_vision_and_scales(tmp_path: Path) -> None:
    write_safetensors(
        tmp_path / "model.safetensors",
        {
            "model.layers.0.mlp.down_proj.weight": ("F8_E4M3", [16, 32]),
            "model.layers.0.mlp.down_proj.weight_scale_inv": ("F32", [1, 1]),
            "model.layers.2.eh_proj.weight": (
                "BF16",
                [16, 32],
            ),  # DeepSeek MTP: layer index = num_hidden_layers
            "mtp.fc.weight": ("BF16", [16, 32]),
            "model.visual.blocks.0.attn.qkv.weight": ("BF16", [48, 16]),
        },
    )
    summary = checkpoint.checkpoint_summary(tmp_path, num_hidden_layers=2)
    assert summary is not None
    assert {g: t.parameters for g, t in summary.by_group.items()} == {
        "text": 512,
        "scale": 1,
        "mtp": 1024,
        "vision": 768,
    }
    assert summary.by_dtype["F8_E4M3"].weight_bytes == 512  # 1 byte per element
    assert summary.by_dtype["F32"].weight_bytes == 4


def test_no_safetensors_means_no_summary(tmp_path: Path) -> None:
    assert checkpoint.checkpoint_summary(tmp_path, num_hidden_layers=2) is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\n", "a Git LFS pointer"),
        (b"\x03\x00", r"not a safetensors file \(got 2 bytes, expected >= 8\)"),
        ((2**40).to_bytes(8, "little"), "implausible header length"),
        ((4).to_bytes(8, "little") + b"{no}", "header is not a JSON object"),
        ((2).to_bytes(8, "little") + b"[]", "header is not a JSON object"),
    ],
)
def test_bad_safetensors_files_are_named(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(DataFileError, match=rf"^{path}: {message}"):
        checkpoint.safetensors_header(path)


def test_truncated_and_malformed_entries_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    write_safetensors(path, {"a": ("F32", [100])})
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DataFileError, match=r"file is truncated \(got \d+ bytes, expected >= \d+\)"):
        checkpoint.safetensors_header(path)
    raw = json.dumps({"a": {"dtype": "F32", "shape": [1]}}).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw)
    with pytest.raises(DataFileError, match=r"malformed tensor entry"):
        checkpoint.safetensors_header(path)


def test_missing_shards_are_listed(tmp_path: Path) -> None:
    root = tiny_llama_checkpoint(tmp_path / "tiny")
    (root / "model-00002-of-00002.safetensors").unlink()
    index = {
        "weight_map": {
            "model.norm.weight": "model-00002-of-00002.safetensors",
            "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        }
    }
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    summary = checkpoint.checkpoint_summary(root, num_hidden_layers=2)
    assert summary is not None and summary.missing_shards == ["model-00002-of-00002.safetensors"]


# --- CLI ------------------------------------------------------------------------------------------------


def test_cli_prints_yaml_to_stdout_and_report_to_stderr(tmp_path: Path) -> None:
    root = tiny_llama_checkpoint(tmp_path / "Tiny-Llama")
    result = runner.invoke(app, ["models", "import", str(root)])
    assert result.exit_code == 0, result.output
    card = ModelCard.model_validate(yaml.safe_load(result.stdout))
    assert card.id == "tiny-llama" and card.head_dim == 4 and card.source.hf_repo == "acme/Tiny-Llama"
    assert "difference +0" in card.notes
    assert "parameters in the checkpoint (text decoder):" in result.stderr
    assert "matches" in result.stderr and "BF16" in result.stderr


def test_cli_accepts_the_config_file_itself(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "q", QWEN3_0_6B, [])
    result = runner.invoke(app, ["models", "import", str(root / "config.json"), "--id", "qwen3-0.6b"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["id"] == "qwen3-0.6b"
    assert "card not checked against weights" in result.stderr


def test_cli_writes_out_atomically_and_refuses_to_clobber(tmp_path: Path) -> None:
    root = tiny_llama_checkpoint(tmp_path / "tiny")
    out = tmp_path / "cards" / "tiny-llama.yaml"
    out.parent.mkdir()
    first = runner.invoke(app, ["models", "import", str(root), "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert f"wrote {out}" in first.stdout
    card = catalog.load_item(out, ModelCard)  # id == file stem, as modelcards/ requires
    assert params.parameter_count(card) == TINY_LLAMA_PARAMETERS
    assert [p.name for p in out.parent.iterdir()] == ["tiny-llama.yaml"]  # no temp file left behind

    out.write_text("mine\n")
    again = runner.invoke(app, ["models", "import", str(root), "--out", str(out)])
    assert again.exit_code == 2
    # worded as every other writer's (planner.atomic): the flag, the path, --force and the backup's name
    assert again.stderr == (
        f"kvplan: error: --out: {out}: already exists (got an existing file, expected a new path); pass "
        "--force to replace it (the old file is then kept as tiny-llama.yaml.bak)\n"
    )
    assert out.read_text() == "mine\n"

    forced = runner.invoke(app, ["models", "import", str(root), "--out", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    assert catalog.load_item(out, ModelCard).id == "tiny-llama"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--id", "Bad_Id"], "--id: must be lowercase kebab-case (got 'Bad_Id'"),
        (["--out", "/nonexistent-dir/x.yaml"], "--out: directory does not exist"),
    ],
)
def test_cli_bad_flags_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    root = tiny_llama_checkpoint(tmp_path / "tiny")
    result = runner.invoke(app, ["models", "import", str(root), *args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_cli_errors_name_the_file(tmp_path: Path) -> None:
    root = write_checkpoint(tmp_path / "m", {**TINY_LLAMA, "model_type": "gpt2"}, [])
    result = runner.invoke(app, ["models", "import", str(root)])
    assert result.exit_code == 2
    assert f"{root / 'config.json'}: model_type: unsupported (got 'gpt2'" in result.stderr
    missing = runner.invoke(app, ["models", "import", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "config file not found" in missing.stderr


def test_cli_reports_mtp_and_vision_of_a_qwen3_5_checkpoint(tmp_path: Path) -> None:
    text = {
        **QWEN3_5_TEXT,
        "hidden_size": 16,
        "num_hidden_layers": 4,
        "head_dim": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 32,
        "vocab_size": 64,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 2,
        "linear_key_head_dim": 4,
        "linear_value_head_dim": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    }
    root = write_checkpoint(
        tmp_path / "q35",
        {**QWEN3_5_27B, "text_config": text},
        [
            {
                "model.language_model.embed_tokens.weight": ("BF16", [64, 16]),
                "mtp.fc.weight": ("BF16", [16, 32]),
                "model.visual.patch_embed.proj.weight": ("BF16", [16, 24]),
            }
        ],
    )
    result = runner.invoke(app, ["models", "import", str(root), "--id", "tiny-q35"])
    assert result.exit_code == 0, result.output
    assert "MTP: checkpoint 512, geometry" in result.stderr
    assert "vision tower (not in the card): 384 params" in result.stderr
    assert "differs by" in result.stderr  # only the embedding is present: far from the geometry


def test_an_unknown_torch_dtype_or_a_text_config_that_is_no_object_is_refused() -> None:
    """torch_dtype is one of the dtypes Hugging Face writes (not 'banana'); a text_config that is not an
    object is refused by name instead of the outer config being read as the text model."""
    with pytest.raises(DataFileError, match=r"torch_dtype: Input should be 'bfloat16'"):
        hfimport.card_from_config_dict({**TINY_LLAMA, "torch_dtype": "banana"}, card_id="t")
    with pytest.raises(DataFileError, match=r"text_config: not an object \(got list"):
        hfimport.card_from_config_dict({**QWEN3_5_27B, "text_config": [1, 2]}, card_id="t")
