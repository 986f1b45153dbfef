"""DeepSeek-V4 compressed sparse attention (attention 'csa', planner/csa.py): cache, state, weights and the
step model's attention read, against hand-worked numbers for the deepseek-v4-flash / -pro cards."""

from __future__ import annotations

import numpy as np
import pytest

from planner import catalog, csa, memory
from planner.dtypes import storage_dtype
from planner.params import active_parameter_count, parameter_count
from planner.perf.compressed import CompressedLayers, attention_cost, indexed_step, records
from planner.perf.terms import Step

BF16 = storage_dtype("bf16")


def card(model_id: str):  # type: ignore[no-untyped-def]
    return catalog.resolve_model(model_id)[0]


def test_flash_layer_classes_from_compress_ratios() -> None:
    flash = card("deepseek-ai/DeepSeek-V4-Flash")
    assert csa.ratio_layers(flash) == {0: 2, 4: 21, 128: 20}
    assert csa.ratio_layers(flash, mtp=True) == {0: 3, 4: 21, 128: 20}  # the MTP entry is 0
    assert flash.sparse_attention_layers == 21  # the indexer layers
    assert csa.ratio_layers(card("deepseek-v4-pro")) == {4: 30, 128: 31}


def test_cache_bytes_per_token_by_hand() -> None:
    # ratio 4: 512 x 2 B / 4 = 256 + (128 int8 + 2 B scale) / 4 = 32.5; ratio 128: 1024 / 128 = 8
    # 21 x 288.5 + 20 x 8 = 6,218.5 -> 6,219 B (V3.2's MLA + index key: 61 x 1,408 = 85,888 B)
    flash = card("deepseek-v4-flash")
    assert csa.cache_bytes_per_token(flash, kv_dtype=BF16) == 6219
    assert memory.kv_cache_bytes_per_token(flash, kv_dtype=BF16, tp=4, mtp=True) == 6219  # MTP: window only
    # int8 records: 21 x (512 + 130) / 4 + 20 x 512 / 128 = 3,370.5 + 80 -> 3,451
    assert csa.cache_bytes_per_token(flash, kv_dtype=storage_dtype("int8")) == 3451
    # Pro: 30 x 288.5 + 31 x 8 = 8,655 + 248 = 8,903
    assert csa.cache_bytes_per_token(card("deepseek-v4-pro"), kv_dtype=BF16) == 8903


def test_state_bytes_per_sequence_by_hand() -> None:
    # window 128 x 512 x 2 = 131,072 per layer (43); ratio-4 state 8 tokens x 2 x 2 x 512 x 4 = 65,536 (21);
    # ratio-128 state 128 x 2 x 512 x 4 = 524,288 (20); the indexer's 8 x 2 x 2 x 128 x 4 = 16,384 (21)
    flash = card("deepseek-v4-flash")
    expected = 43 * 131_072 + 21 * 65_536 + 20 * 524_288 + 21 * 16_384
    assert expected == 17_842_176
    assert csa.state_bytes_per_sequence(flash) == expected
    bf16 = storage_dtype("bf16")
    assert (
        memory.linear_state_bytes_per_sequence(flash, conv_dtype=bf16, tp=4, mtp=True) == expected + 131_072
    )


def test_parameter_counts_match_the_published_totals() -> None:
    # V4-Flash: 284 B total, 13 B active (the model card); V4-Pro: 1.6 T total, 49 B active
    flash, pro = card("deepseek-v4-flash"), card("deepseek-v4-pro")
    assert parameter_count(flash) == pytest.approx(284e9, rel=0.005)
    assert active_parameter_count(flash) == pytest.approx(13.8e9, rel=0.01)  # 12.7 B without embeddings
    assert parameter_count(pro) == pytest.approx(1.6e12, rel=0.02)
    assert active_parameter_count(pro) == pytest.approx(49e9, rel=0.02)


def step(cached: float, attended: float, *, tokens: float = 1.0, sequences: float = 1.0) -> Step:
    one = np.asarray
    return Step(
        tokens=one(tokens),
        sequences=one(sequences),
        cached_tokens=one(cached),
        attended_tokens=one(attended),
        logits_tokens=one(tokens),
        draft_runs=0,
        draft_tokens=one(0.0),
        draft_logits=one(0.0),
    )


FLASH_LAYERS = CompressedLayers(
    counts={0: 2, 4: 21, 128: 20}, window=128, topk=512, window_bytes=1024, record_bytes=1024
)


def test_records_attended_at_32k() -> None:
    # 32,768 cached tokens: ratio 4 -> 8,192 records, capped at 512 (x 21); ratio 128 -> 256 (x 20)
    assert float(records(np.asarray(32_768.0), FLASH_LAYERS)) == 21 * 512 + 20 * 256


def test_decode_attention_read_by_hand() -> None:
    # one decode query over 32,768 cached tokens: 43 windows of 128 + 15,872 records, 1,024 B each
    kept, (hbm, flop, read) = attention_cost(
        step(32_768.0, 32_768.0), FLASH_LAYERS, np.asarray(1.0), flop_per_entry=2 * 16 * 1024
    )
    entries = 43 * 128 + 21 * 512 + 20 * 256
    assert float(read) == entries * 1024
    assert float(hbm) == entries * 1024 + 43 * 1024 + 21 * 1024 / 4 + 20 * 1024 / 128
    assert float(flop) == entries * 2 * 16 * 1024
    assert float(kept.cached_tokens) == pytest.approx(entries / 43)


def test_short_context_reads_window_and_few_records() -> None:
    # 100 cached tokens: the window holds them all; 25 ratio-4 records, 100 / 128 of a ratio-128 record
    _, (_, _, read) = attention_cost(step(100.0, 100.0), FLASH_LAYERS, np.asarray(1.0), flop_per_entry=1.0)
    assert float(read) == pytest.approx((43 * 100 + 21 * 25 + 20 * 100 / 128) * 1024)


def test_indexer_sees_one_key_per_four_tokens() -> None:
    seen = indexed_step(step(32_768.0, 32_000.0), ratio=4)
    assert float(seen.cached_tokens) == 8192 and float(seen.attended_tokens) == 8000
    assert indexed_step(step(10.0, 5.0), ratio=1).cached_tokens == 10.0


def test_csa_card_checks() -> None:
    flash = card("deepseek-v4-flash")
    with pytest.raises(ValueError, match="compress_ratios needs"):
        flash.model_validate(flash.model_dump() | {"compress_ratios": [0, 4]})
    with pytest.raises(ValueError, match="only valid with attention 'csa'"):
        card("deepseek-v3.2").model_validate(card("deepseek-v3.2").model_dump() | {"compress_ratios": [0]})


def test_vllm_pool_sizes_the_compressed_cache_by_its_bytes() -> None:
    """engines/vllm/pool.compressed_pool: a 128-token block holds every layer's records (6,219 B a token in
    bf16 for V4-Flash) and a sequence's 17.0 MiB of windows and compressor state takes whole blocks; the
    plan's batch and `kvplan vllm`'s --max-num-seqs read the same pool."""
    import json

    from typer.testing import CliRunner

    from planner.cli import app
    from planner.engines.vllm import pool as vm

    card, _ = catalog.resolve_model("deepseek-v4-flash")
    settings = vm.PoolSettings(
        platform="ascend", kv_dtype=BF16, conv_dtype=BF16, tp=4, max_model_len_tokens=32768
    )
    page = 128 * csa.cache_bytes_per_token(card, kv_dtype=BF16)
    pool = vm.vllm_pool(card, settings=settings, available_bytes=1000 * page)
    state_blocks = -(-csa.state_bytes_per_sequence(card) // page)
    assert (pool.page_bytes, pool.num_blocks) == (page, 1000)
    assert pool.blocks_per_request == 32768 // 128 + state_blocks
    flags = ["-m", "deepseek-v4-flash", "--card", "ascend-910c", "--dtype", "int8", "--tp", "8"]
    flags += ["--ctx", "32k"]
    runner = CliRunner()
    plan = json.loads(runner.invoke(app, [*flags, "--engine", "vllm", "--json"]).stdout)
    command = json.loads(runner.invoke(app, ["vllm", *flags, "--weights-path", "/w", "--json"]).stdout)
    assert plan["recommendation"]["max_batch_size"] == command["vllm"]["max_num_seqs"] > 1
