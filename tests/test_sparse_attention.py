"""DeepSeek sparse attention (DeepSeek-V3.2's lightning indexer + top-k MLA): card fields, KV bytes, vLLM
pages, and the step model's attn.core / attn.indexer terms. Every expected value shows its derivation from
the card (modelcards/deepseek-v3.2.yaml: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64, index_n_heads 64,
index_head_dim 128, index_topk 2048)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from planner import catalog, memory
from planner.dtypes import StorageDType
from planner.engines.vllm import pool as vm
from planner.perf import roofline, sparse
from planner.perf.roofline import decode_step
from planner.schema import ModelCard
from tests import helpers

BF16, INT8 = StorageDType.bf16, StorageDType.int8
LAYERS, LATENT, INDEX_DIM, INDEX_HEADS, TOPK = 61, 512 + 64, 128, 64, 2048


def dsa_card() -> ModelCard:
    return catalog.load_model("deepseek-v3.2")


def deployment(model_id: str = "deepseek-v3.2", **kw: object):
    """An uncalibrated W8A8 ascend-910c deployment at tp 16 (the datasheet profile: no fitted terms)."""
    fields: dict[str, object] = {"tp": 16, "ctx_tokens": 65536, "calibrated": False, **kw}
    return helpers.deployment(model_id, "ascend-910c", scheme="int8", **fields)


def op(ledger: roofline.Ledger, name: str) -> roofline.Op:
    return next(o for o in ledger.ops if o.name == name)


@pytest.mark.parametrize(
    ("kv_dtype", "tp", "mtp", "expected"),
    [
        (BF16, 1, False, LAYERS * (LATENT * 2 + INDEX_DIM * 2)),  # 85_888 = 61 x (1152 + 256)
        (BF16, 16, False, LAYERS * (LATENT * 2 + INDEX_DIM * 2)),  # replicated: the same on every rank
        (BF16, 8, True, (LAYERS + 1) * (LATENT * 2 + INDEX_DIM * 2)),  # 87_296: the MTP layer's own cache
        (INT8, 8, False, LAYERS * (LATENT + INDEX_DIM + 2)),  # 43_066: int8 index key + one fp16 scale
    ],
)
def test_kv_bytes_per_token_hold_the_latent_and_the_index_key(
    kv_dtype: StorageDType, tp: int, mtp: bool, expected: int
) -> None:
    assert memory.kv_cache_bytes_per_token(dsa_card(), kv_dtype=kv_dtype, tp=tp, mtp=mtp) == expected


def test_hand_worked_figures() -> None:
    assert LAYERS * (LATENT * 2 + INDEX_DIM * 2) == 85_888
    assert LAYERS * (LATENT + INDEX_DIM + 2) == 43_066


def test_dense_mla_card_keeps_its_kv_bytes() -> None:
    # DeepSeek-V3 has no index_* fields: 61 x (512 + 64) x 2 = 70_272, as before sparse attention existed.
    card = catalog.load_model("deepseek-v3")
    assert not card.is_sparse_attention
    assert memory.kv_cache_bytes_per_token(card, kv_dtype=BF16, tp=8) == 70_272


def test_vllm_ascend_page_holds_the_mla_page_and_the_index_page() -> None:
    # vllm-ascend: 128-token blocks; one block id reserves (576 + 128) x 2 B x 128 in each of the 61 layers
    # and the MTP layer (num_spec 3): page 180_224 B per layer, 62 layers per group.
    available = 40 * 2**30
    settings = vm.PoolSettings(
        platform="ascend", kv_dtype=BF16, conv_dtype=BF16, tp=8, max_model_len_tokens=8192, num_spec=3
    )
    pool = vm.vllm_pool(dsa_card(), settings=settings, available_bytes=available)
    assert (pool.block_size_tokens, pool.page_bytes, pool.layers_per_group) == (128, 128 * 1408, 62)
    assert pool.num_blocks == available // (128 * 1408) // 62


def test_capped_mean_attended_hand_worked() -> None:
    # One sequence, q = 100 queries after p = 2000 cached tokens, K = 2048: the first m = 48 queries attend
    # 2001..2048 keys, the other 52 attend 2048: (48 x 2000 + 48 x 49 / 2 + 52 x 2048) / 100 = 2036.72.
    step = decode_step(deployment(), batch=np.asarray(1.0), ctx_tokens=np.asarray(2000.0))
    straddle = roofline.Step(
        **{**vars(step), "tokens": np.asarray(100.0), "attended_tokens": np.asarray(2050.5)}
    )
    assert float(sparse.capped_mean_attended(straddle, topk_tokens=TOPK)) == pytest.approx(2036.72, rel=1e-12)
    # under the cap it is the causal mean itself; a prefix at or past the cap attends K
    assert float(sparse.capped_mean_attended(step, topk_tokens=4096)) == pytest.approx(
        float(step.attended_tokens)
    )
    assert float(sparse.capped_mean_attended(step, topk_tokens=1024)) == 1024.0


@pytest.mark.parametrize("mtp", [0, 3])
def test_decode_attention_is_flat_beyond_topk_and_the_indexer_is_not(mtp: int) -> None:
    dep = deployment(mtp_tokens=mtp)
    ledgers = [roofline.decode_ledger(dep, batch=4, ctx_tokens=ctx) for ctx in (4096, 16384, 65000)]
    core = [op(ledger, "attn.core") for ledger in ledgers]
    assert core[0].time_s == core[1].time_s == core[2].time_s
    assert core[0].bytes == core[2].bytes
    indexer = [op(ledger, "attn.indexer").time_s for ledger in ledgers]
    assert indexer[0] < indexer[1] < indexer[2]
    shorter = roofline.decode_ledger(dep, batch=4, ctx_tokens=1024)
    assert op(shorter, "attn.core").bytes < core[0].bytes  # below index_topk it still grows


def test_decode_attention_bytes_hand_worked() -> None:
    # batch 4 at ctx 16384, no MTP: attention reads min(16384, 2048) = 2048 latents per sequence and writes
    # the 4 new ones: (4 x 2048 + 4) x 61 x 1152 B; the indexer reads 16384 index keys per sequence and writes
    # 4: (4 x 16384 + 4) x 61 x 256 B (tp 16: cache blocks of 128 tokens, 16384 is whole blocks).
    ledger = roofline.decode_ledger(deployment(), batch=4, ctx_tokens=16384)
    assert op(ledger, "attn.core").bytes == (4 * 2048 + 4) * LAYERS * LATENT * 2
    assert op(ledger, "attn.indexer").bytes == (4 * 16384 + 4) * LAYERS * INDEX_DIM * 2
    # FLOP per scored key: 64 heads x (2 x 128 + 3) x 61 layers; 4 queries each score 16384 + 1 keys
    assert op(ledger, "attn.indexer").flop == 4 * 16385 * INDEX_HEADS * (2 * INDEX_DIM + 3) * LAYERS


def test_prefill_indexer_is_quadratic_and_attention_is_capped() -> None:
    # A 16384-token prompt in 8192-token chunks: the indexer scores sum over queries of their position =
    # T (T + 1) / 2 keys; the attention of a query attends min(position, 2048).
    prompt = 16384
    ledger = roofline.prefill_ledger(deployment(max_prefill_tokens=8192), prompt_tokens=prompt)
    per_key = INDEX_HEADS * (2 * INDEX_DIM + 3) * LAYERS
    assert op(ledger, "attn.indexer").flop == pytest.approx(per_key * prompt * (prompt + 1) / 2, rel=1e-12)
    capped_keys = 2048 * 2049 / 2 + (prompt - 2048) * 2048
    attention_per_key = 2 * (128 // 16) * (LATENT + 512) * LAYERS  # 8 heads per rank, absorbed MLA
    assert op(ledger, "attn.core").flop == pytest.approx(attention_per_key * capped_keys, rel=1e-12)


def test_dense_mla_card_has_no_indexer_and_attends_everything() -> None:
    dep = deployment("deepseek-v3")
    ledger = roofline.decode_ledger(dep, batch=4, ctx_tokens=16384)
    assert all("indexer" not in o.name for o in ledger.ops)
    assert op(ledger, "attn.core").bytes == (4 * 16384 + 4) * LAYERS * LATENT * 2


def test_schema_needs_the_three_index_fields_together() -> None:
    fields = dsa_card().model_dump()
    with pytest.raises(ValidationError, match="index_n_heads, index_head_dim and index_topk together"):
        ModelCard.model_validate({**fields, "index_topk": None})
    gqa = catalog.load_model("qwen3-32b").model_dump()
    with pytest.raises(ValidationError, match="index_n_heads must equal num_key_value_heads"):
        ModelCard.model_validate({**gqa, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048})
    with pytest.raises(ValidationError, match="greater than 0"):
        ModelCard.model_validate({**fields, "index_topk": 0})
