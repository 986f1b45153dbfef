"""`kvplan models import` for MiniMax-M2 (full-attention GQA MoE) and Kimi-K2 / K2.5 (DeepSeek-V3 geometry).

Issue 10: the published Ascend corpus has MiniMax-M2.5/M2.7 and Kimi-K2.5/K2-Thinking rows. The configs are
the transcriptions in lab/published/hf_configs/ (their `_transcribed_from` key gives the source).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from planner import catalog, params
from planner.errors import DataFileError
from planner.importers import hfimport

pytestmark = pytest.mark.lab  # reads the lab's data or scripts (tests/conftest.py: lab implies slow)

CONFIGS = Path(__file__).resolve().parents[1] / "lab" / "published" / "hf_configs"


def _config(name: str) -> dict[str, Any]:
    return hfimport.read_config(CONFIGS / f"{name}.config.json")


def test_minimax_m2_maps_experts_and_keeps_full_attention_gqa() -> None:
    card = hfimport.card_from_config_dict(_config("minimax-m2.5"), card_id="minimax-m2.5")
    assert (card.model_type, card.attention, card.qk_norm) == ("minimax_m2", "gqa", True)
    # num_local_experts -> num_experts; intermediate_size is the expert width; no shared expert, no MTP.
    assert (card.num_experts, card.num_experts_per_tok, card.moe_intermediate_size) == (256, 8, 1536)
    assert card.shared_expert_intermediate_size is None and card.mtp_layers == 0
    assert card.moe_layers == card.num_hidden_layers == 62
    derived = card.sources[-1]
    assert derived.confidence == "D"
    assert {"num_experts", "moe_intermediate_size", "qk_norm", "mtp_num_hidden_layers"} <= set(derived.fields)


def test_minimax_m2_5_parameter_count_reconciles_with_the_hub_total() -> None:
    """The Hub's safetensors total for MiniMax-M2.5 is 228,703,644,928 (quoted by a param-counter test, see
    the card). It also counts tensors the card does not: FP8 weight_scale_inv blocks of 128 x 128, one
    e_score_correction_bias of 256 a layer, and the per-layer q/k norms' extra weights."""
    card = hfimport.card_from_config_dict(_config("minimax-m2.5"), card_id="minimax-m2.5")
    layers, experts, hidden, expert_width, head_dim = 62, 256, 3072, 1536, 128
    q_width, kv_width = 48 * head_dim, 8 * head_dim
    blocks = 128
    expert_scales = 3 * (expert_width // blocks) * (hidden // blocks) * experts * layers
    attention_scales = (2 * q_width + 2 * kv_width) // blocks * (hidden // blocks) * layers
    routing_bias = experts * layers
    qk_norm_extra = (q_width + kv_width - 2 * head_dim) * layers
    hub_total = 228_703_644_928
    not_in_card = expert_scales + attention_scales + routing_bias + qk_norm_extra
    assert params.parameter_count(card) == hub_total - not_in_card


def test_minimax_lightning_attention_and_shared_experts_are_refused() -> None:
    lightning = {**_config("minimax-m2.5"), "attn_type_list": [0, 1] * 31}
    with pytest.raises(DataFileError, match=r"attn_type_list: not supported .*lightning attention"):
        hfimport.card_from_config_dict(lightning, card_id="t", origin="m/config.json")
    shared = {**_config("minimax-m2.5"), "shared_intermediate_size": 1536}
    with pytest.raises(DataFileError, match=r"shared_intermediate_size: not supported .*\(got 1536"):
        hfimport.card_from_config_dict(shared, card_id="t")


@pytest.mark.parametrize("inner_type", ["deepseek_v3", "kimi_k2"])
def test_kimi_k2_5_reads_its_text_config_as_mla(inner_type: str) -> None:
    config = copy.deepcopy(_config("kimi-k2.5"))
    config["text_config"]["model_type"] = inner_type
    card = hfimport.card_from_config_dict(config, card_id="kimi-k2.5")
    assert (card.model_type, card.attention) == (inner_type, "mla")
    assert (card.n_routed_experts, card.n_shared_experts, card.first_k_dense_replace) == (384, 1, 1)
    assert card.source.hf_repo == "moonshotai/Kimi-K2.5"


def test_kimi_k2_thinking_top_level_config_imports_like_k2_5_text() -> None:
    text = {**_config("kimi-k2.5")["text_config"], "model_type": "kimi_k2"}
    k2 = hfimport.card_from_config_dict(text, card_id="k2")
    k25 = hfimport.card_from_config_dict(_config("kimi-k2.5"), card_id="k25")
    assert k2.attention == "mla"
    assert params.parameter_count(k2) == params.parameter_count(k25)


def test_kimi_k2_5_parameter_count_is_the_report_tensor_list() -> None:
    """Sum of the tensor shapes in the Kimi-K2.5 model-information report (see the card's sources)."""
    card = catalog.load_model("kimi-k2.5")
    vocab, hidden, layers, moe_layers, experts = 163840, 7168, 61, 60, 384
    embed_and_head = 2 * vocab * hidden
    attention = 1536 * hidden + 1536 + 12288 * 1536 + 576 * hidden + 512 + 16384 * 512 + hidden * 8192
    layer_norms = 2 * hidden
    dense_mlp = 3 * 18432 * hidden
    routed, gate_and_bias, shared = experts * 3 * 2048 * hidden, experts * (hidden + 1), 3 * 2048 * hidden
    moe = routed + gate_and_bias + shared
    expected = embed_and_head + layers * (attention + layer_norms) + dense_mlp + moe_layers * moe + hidden
    assert params.parameter_count(card) == expected


@pytest.mark.parametrize(
    ("hf_name", "card_id"),
    [
        ("MiniMaxAI/MiniMax-M2.5", "minimax-m2.5"),
        ("MiniMaxAI/MiniMax-M2.7", "minimax-m2.5"),
        ("moonshotai/Kimi-K2.5", "kimi-k2.5"),
        ("moonshotai/Kimi-K2-Thinking", "kimi-k2.5"),
        ("moonshotai/Kimi-K2.6", "kimi-k2.5"),
    ],
)
def test_corpus_names_resolve_to_the_new_cards(hf_name: str, card_id: str) -> None:
    card, alias = catalog.resolve_model(hf_name)
    assert (card.id, alias) == (card_id, hf_name)
