"""`kvplan models import` for GLM-5.x (GlmMoeDsaForCausalLM, model_type glm_moe_dsa): DeepSeek-V3.2's MLA and
sparse-attention indexer with wider heads, read by the deepseek_v32 family.

Issue 23: the published Ascend corpus has GLM-5.1 / GLM-5.2 rows on vllm-ascend. The configs are the
transcriptions lab/published/hf_configs/glm-5.1.config.json and glm-5.2.config.json (their
`_transcribed_from` key gives the sources): GLM-5.2 is GLM-5.1's geometry plus IndexShare, which kvplan
does not model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from planner import catalog, memory, params
from planner.dtypes import storage_dtype
from planner.engines import checkpoints
from planner.importers import hfimport

pytestmark = pytest.mark.lab  # reads the lab's data (tests/conftest.py: lab implies slow)

GEOMETRY = {
    "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
    "vocab_size", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
    "first_k_dense_replace", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
    "v_head_dim", "index_n_heads", "index_head_dim", "index_topk", "num_nextn_predict_layers",
    "max_position_embeddings",
}  # fmt: skip
CONFIG = Path(__file__).resolve().parents[1] / "lab" / "published" / "hf_configs" / "glm-5.1.config.json"


def _card():  # type: ignore[no-untyped-def]
    return hfimport.card_from_config_dict(hfimport.read_config(CONFIG), card_id="glm-5.1")


def test_glm_moe_dsa_imports_as_mla_with_the_indexer() -> None:
    card = _card()
    assert (card.model_type, card.attention) == ("glm_moe_dsa", "mla")
    # GLM-5's heads are wider than DeepSeek-V3.2's (qk_nope 192 vs 128, v 256 vs 128); 32 index heads vs 64.
    assert (card.qk_nope_head_dim, card.v_head_dim, card.q_lora_rank) == (192, 256, 2048)
    assert (card.index_n_heads, card.index_head_dim, card.index_topk) == (32, 128, 2048)
    assert (card.n_routed_experts, card.num_experts_per_tok, card.first_k_dense_replace) == (256, 8, 3)


def test_glm5_parameter_count_is_the_published_744b() -> None:
    """GLM-5's README: 744 B parameters (40 B active). kvplan counts 743,911,218,432 (main model, no MTP
    layer): 0.01 % under 744 B; active 41.8 B (embeddings and lm_head included, which 40 B rounds away)."""
    card = _card()
    assert params.parameter_count(card) == 743_911_218_432
    assert params.parameter_count(card) == pytest.approx(744e9, rel=1e-3)
    assert params.active_parameter_count(card) == pytest.approx(41.8e9, rel=1e-2)


def test_glm5_kv_bytes_per_token_are_deepseek_v32s_latent_plus_index_key() -> None:
    """Per layer in bf16: (512 + 64) x 2 B latent + 128 x 2 B index key = 1,408 B (as deepseek-v3.2, whose
    latent and index key have the same widths); x 78 layers = 109,824 B per token."""
    glm, dsv32 = catalog.load_model("glm-5.1"), catalog.load_model("deepseek-v3.2")
    bf16 = storage_dtype("bf16")
    glm_bytes = memory.kv_cache_bytes_per_token(glm, kv_dtype=bf16, tp=1)
    dsv32_bytes = memory.kv_cache_bytes_per_token(dsv32, kv_dtype=bf16, tp=1)
    assert glm_bytes == 78 * 1_408
    assert glm_bytes // 78 == dsv32_bytes // 61


@pytest.mark.parametrize(
    ("name", "card_id"),
    [("zai-org/GLM-5.1", "glm-5.1"), ("zai-org/GLM-5.2", "glm-5.2"), ("glm-5.2-w8a8", "glm-5.2")],
)
def test_glm5_names_resolve_to_their_card(name: str, card_id: str) -> None:
    assert catalog.resolve_model(name)[0].id == card_id


def test_glm5_2_is_glm5_1s_geometry_under_its_own_repo() -> None:
    """Two cards so that each names its own Hugging Face repo (and vLLM checkpoint); geometry identical."""
    one, two = catalog.load_model("glm-5.1"), catalog.load_model("glm-5.2")
    assert two.source.hf_repo == "zai-org/GLM-5.2"
    assert one.model_dump(include=GEOMETRY) == two.model_dump(include=GEOMETRY)


@pytest.mark.parametrize(
    ("card_id", "repo"), [("glm-5.1", "Eco-Tech/GLM-5.1-w8a8"), ("glm-5.2", "Eco-Tech/GLM-5.2-w8a8")]
)
def test_glm5_int8_plans_name_the_vllm_ascend_w8a8_checkpoint(card_id: str, repo: str) -> None:
    found = checkpoints.checkpoint(catalog.load_model(card_id), scheme="int8")
    assert found is not None and (found.repo, found.quantization) == (repo, "ascend")
