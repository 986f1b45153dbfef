"""MiniMax sparse attention (MiniMax-M3: GQA with an indexer on 57 of 60 layers): card, parameter count, KV
bytes, vLLM pages and the step model. Every expected value shows its derivation from the card
(modelcards/minimax-m3.yaml: 60 layers, 4 KV heads of 128, index_head_dim 128, index_topk 2048 = 16 blocks of
128, sparse_attention_freq 0 for layers 0-2) and vllm-ascend 182b75ea (models/minimax_m3)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner import catalog, memory, params
from planner.dtypes import StorageDType
from planner.engines.vllm import pool as vm
from planner.perf import roofline
from planner.schema import ModelCard
from tests import helpers

BF16, INT8 = StorageDType.bf16, StorageDType.int8
LAYERS, SPARSE, HEAD_DIM, INDEX_DIM, TOPK = 60, 57, 128, 128, 2048
# The checkpoint's tensor list (code-search id 62774369633): 427,040,140,160 parameters, of which the vision
# tower and projectors hold 865,567,232 and e_score_correction_bias (57 x 128) is not itemized by the card.
CHECKPOINT_PARAMS, VISION_PARAMS, SCORE_BIAS = 427_040_140_160, 865_567_232, SPARSE * 128


def card() -> ModelCard:
    return catalog.load_model("minimax-m3")


def deployment(**kw: object):
    """A bf16 ascend-910c deployment at tp 8 (the datasheet profile: no fitted terms)."""
    fields: dict[str, object] = {"tp": 8, "ctx_tokens": 65536, "calibrated": False, **kw}
    return helpers.deployment("minimax-m3", "ascend-910c", scheme="bf16", **fields)


def op(ledger: roofline.Ledger, name: str) -> roofline.Op:
    return next(o for o in ledger.ops if o.name == name)


def test_card_resolves_from_the_hub_name_and_counts_its_sparse_layers() -> None:
    resolved, _ = catalog.resolve_model("MiniMaxAI/MiniMax-M3")
    assert resolved.id == "minimax-m3"
    assert (resolved.is_sparse_attention, resolved.sparse_attention_layers) == (True, SPARSE)
    assert resolved.full_attention_layers == LAYERS


def test_parameter_count_matches_the_checkpoint() -> None:
    counted = sum(t.elements for t in params.model_tensors(card(), tp=1))
    assert counted + VISION_PARAMS + SCORE_BIAS == CHECKPOINT_PARAMS


def test_indexer_weights_per_rank() -> None:
    # tp 8: 4 KV heads replicated to 1 per rank, so 1 index head of 128 per rank; the index key is replicated
    tensors = {t.name: t for t in params.model_tensors(card(), tp=8)}
    assert (tensors["index_q_proj"].out_features, tensors["index_q_proj"].count) == (INDEX_DIM, SPARSE)
    assert (tensors["index_k_proj"].out_features, tensors["index_k_proj"].count) == (INDEX_DIM, SPARSE)


@pytest.mark.parametrize(
    ("kv_dtype", "tp", "expected"),
    [
        (BF16, 1, 2 * LAYERS * 4 * HEAD_DIM * 2 + SPARSE * INDEX_DIM * 2),  # 137_472 = 122_880 + 14_592
        (BF16, 8, 2 * LAYERS * 1 * HEAD_DIM * 2 + SPARSE * INDEX_DIM * 2),  # 45_312: 1 KV head per rank
        (INT8, 8, 2 * LAYERS * 1 * HEAD_DIM + SPARSE * INDEX_DIM * 2),  # the index keys stay bf16
    ],
)
def test_kv_bytes_per_token_hold_kv_and_the_sparse_layers_index_keys(
    kv_dtype: StorageDType, tp: int, expected: int
) -> None:
    assert memory.kv_cache_bytes_per_token(card(), kv_dtype=kv_dtype, tp=tp) == expected


def test_hand_worked_figures() -> None:
    assert 2 * LAYERS * 4 * HEAD_DIM * 2 + SPARSE * INDEX_DIM * 2 == 137_472
    assert 2 * LAYERS * 1 * HEAD_DIM * 2 + SPARSE * INDEX_DIM * 2 == 45_312


def test_vllm_ascend_block_reserves_kv_and_index_pages() -> None:
    # 128-token blocks; one block id reserves a K/V page (128 x 512 B at tp 8) in each of the 60 layers and an
    # index page (128 x 256 B) in each of the 57 sparse layers: 128 x 45_312 B per block id.
    available = 40 * 2**30
    settings = vm.PoolSettings(
        platform="ascend", kv_dtype=BF16, conv_dtype=BF16, tp=8, max_model_len_tokens=10240
    )
    pool = vm.vllm_pool(card(), settings=settings, available_bytes=available)
    assert (pool.block_size_tokens, pool.page_bytes, pool.layers_per_group) == (128, 128 * 512, LAYERS)
    assert pool.num_blocks == available // (128 * 45_312)


def test_decode_attention_caps_only_the_sparse_layers() -> None:
    # batch 4 at ctx 16384 (whole blocks): the 3 dense layers read 16384 cached tokens, the 57 sparse layers
    # 2048, each 512 B of K/V per token and layer at tp 8; all 60 write the 4 new tokens' K/V.
    ledger = roofline.decode_ledger(deployment(), batch=4, ctx_tokens=16384)
    kv = 2 * HEAD_DIM * 2  # one KV head per rank
    assert op(ledger, "attn.core").bytes == pytest.approx(
        4 * (3 * 16384 + SPARSE * TOPK) * kv + 4 * LAYERS * kv, rel=1e-12
    )
    # the indexer reads every cached index key of the sparse layers and writes the new ones
    assert op(ledger, "attn.indexer").bytes == (4 * 16384 + 4) * SPARSE * INDEX_DIM * 2
    # FLOP per scored key: 1 index head per rank x (2 x 128 + 1 for the block max) x 57 layers
    assert op(ledger, "attn.indexer").flop == 4 * 16385 * 1 * (2 * INDEX_DIM + 1) * SPARSE


def test_short_context_attends_everything() -> None:
    # below index_topk the sparse layers attend every cached token: the same bytes as a dense card would read
    ledger = roofline.decode_ledger(deployment(), batch=1, ctx_tokens=384)
    kv = 2 * HEAD_DIM * 2
    assert op(ledger, "attn.core").bytes == pytest.approx(384 * LAYERS * kv + LAYERS * kv, rel=1e-12)


def test_schema_checks_the_gqa_indexer() -> None:
    fields = card().model_dump()
    with pytest.raises(ValidationError, match="index_n_heads must equal num_key_value_heads"):
        ModelCard.model_validate({**fields, "index_n_heads": 8})
    with pytest.raises(ValidationError, match="sparse_attention_freq needs"):
        ModelCard.model_validate({**fields, "sparse_attention_freq": [1] * 59})
    dense = {**fields, "index_n_heads": None, "index_head_dim": None, "index_topk": None}
    with pytest.raises(ValidationError, match="sparse_attention_freq needs"):
        ModelCard.model_validate(dense)
    plain = ModelCard.model_validate({**dense, "sparse_attention_freq": None})
    assert (plain.is_sparse_attention, plain.sparse_attention_layers) == (False, 0)


@pytest.mark.lab  # reads the lab's transcribed config (tests/conftest.py: lab implies slow)
def test_import_of_the_transcribed_config_is_the_card() -> None:
    # `kvplan models import` of lab/published/hf_configs/minimax-m3.config.json (minimax_m3_vl, text_config
    # without a model_type): sparse_attention_config becomes the index_* fields and sparse_attention_freq.
    from pathlib import Path

    from planner.importers import hfimport

    path = Path(__file__).resolve().parents[1] / "lab" / "published" / "hf_configs" / "minimax-m3.config.json"
    imported = hfimport.card_from_config_dict(
        hfimport.read_config(path), card_id="minimax-m3", origin=path.name
    )
    committed = card()
    for name in ("model_type", "intermediate_size", "first_k_dense_replace", "partial_rotary_factor",
                 "index_topk", "sparse_attention_freq", "vision_tower_uncounted", "qk_norm"):  # fmt: skip
        assert getattr(imported, name) == getattr(committed, name), name
    assert imported.sparse_attention_layers == SPARSE


def minimax_m3_config(**sparse: object) -> dict:
    """A minimal minimax_m3 config.json (60 layers, the first 3 dense), sparse_attention_config updated."""
    flags = [0, 0, 0] + [1] * 57
    sparse_config = {
        "use_sparse_attention": True, "sparse_index_dim": 128, "sparse_num_index_heads": 4,
        "sparse_topk_blocks": 16, "sparse_block_size": 128, "sparse_attention_freq": flags,
    }  # fmt: skip
    sparse_config.update(sparse)
    return {
        "model_type": "minimax_m3", "hidden_size": 6144, "num_hidden_layers": 60, "num_attention_heads": 64,
        "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 200064, "max_position_embeddings": 1048576,
        "tie_word_embeddings": False, "dense_intermediate_size": 12288, "intermediate_size": 3072,
        "num_local_experts": 128, "num_experts_per_tok": 4, "n_shared_experts": 1,
        "shared_intermediate_size": 3072, "moe_layer_freq": flags, "sparse_attention_config": sparse_config,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sparse_topk_blocks": "16"}, r"sparse_topk_blocks: expected an integer >= 1 \(got '16'\)"),
        ({"sparse_topk_blocks": 0}, r"sparse_topk_blocks: expected an integer >= 1 \(got 0\)"),
        ({"sparse_attention_freq": [0.5] * 60}, r"sparse_attention_freq: expected a list of 0 / 1"),
        ({"sparse_attention_freq": "all"}, r"sparse_attention_freq: expected a list of 0 / 1 \(got 'all'\)"),
        ({"sparse_index_dim": None}, r"sparse_attention_config\.sparse_index_dim: required field missing"),
    ],
)  # fmt: skip
def test_import_refuses_a_malformed_sparse_config_in_one_line(change: dict, message: str) -> None:
    from planner.errors import DataFileError
    from planner.importers import hfimport

    with pytest.raises(DataFileError, match=message) as refused:
        hfimport.card_from_config_dict(minimax_m3_config(**change), card_id="m", origin="c.json")
    assert str(refused.value).startswith("c.json: sparse_attention_config.")  # the file and the nested field
    assert "\n" not in str(refused.value)


def test_import_reads_moe_layer_freq_as_flags_and_sparse_off_as_dense() -> None:
    from planner.errors import DataFileError
    from planner.importers import hfimport

    config = minimax_m3_config()
    config["moe_layer_freq"] = 5
    with pytest.raises(DataFileError, match=r"moe_layer_freq: expected a list of 0 / 1 \(got 5\)"):
        hfimport.card_from_config_dict(config, card_id="m", origin="c.json")
    dense = hfimport.card_from_config_dict(
        minimax_m3_config(use_sparse_attention=False), card_id="m", origin="c.json"
    )
    assert not dense.is_sparse_attention and dense.index_topk is None
    sparse = hfimport.card_from_config_dict(minimax_m3_config(), card_id="m", origin="c.json")
    assert sparse.index_topk == 16 * 128 and sparse.sparse_attention_layers == 57
