"""Hypothesis property tests guarding the memory arithmetic's invariants."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planner import catalog, memory, units
from planner.dtypes import StorageDType

MODEL_IDS = catalog.model_ids()
KV_DTYPES = [StorageDType.bf16, StorageDType.fp8, StorageDType.int8]

models = st.sampled_from(MODEL_IDS).map(catalog.load_model)
tps = st.sampled_from([1, 2, 4, 8, 16])


@given(
    card=models,
    kv=st.sampled_from(KV_DTYPES),
    tp=tps,
    seq=st.integers(1, 1 << 20),
    extra=st.integers(0, 1 << 16),
    block=st.sampled_from([16, 64, 128]),
)
def test_sequence_bytes_monotone_in_length(card, kv, tp, seq, extra, block) -> None:
    per_token = memory.kv_cache_bytes_per_token(card, kv_dtype=kv, tp=tp)
    state = memory.linear_state_bytes_per_sequence(card, conv_dtype=StorageDType.bf16, tp=tp)
    short = memory.sequence_bytes(
        seq, kv_bytes_per_token=per_token, state_bytes=state, block_size_tokens=block
    )
    long = memory.sequence_bytes(
        seq + extra, kv_bytes_per_token=per_token, state_bytes=state, block_size_tokens=block
    )
    assert short <= long
    assert short >= seq * per_token + state  # paging never allocates less than the tokens need


@given(card=models, kv=st.sampled_from(KV_DTYPES), tp=tps)
def test_per_device_bytes_non_increasing_in_tp(card, kv, tp) -> None:
    assert memory.kv_cache_bytes_per_token(card, kv_dtype=kv, tp=tp * 2) <= memory.kv_cache_bytes_per_token(
        card, kv_dtype=kv, tp=tp
    )
    assert memory.linear_state_bytes_per_sequence(card, conv_dtype=kv, tp=tp * 2) <= (
        memory.linear_state_bytes_per_sequence(card, conv_dtype=kv, tp=tp)
    )


@settings(max_examples=30)
@given(card=models, tp=tps, scheme=st.sampled_from(["bf16", "fp8", "int8", "w4a16"]))
def test_weights_non_increasing_in_tp(card, tp, scheme) -> None:
    from planner.dtypes import weight_scheme

    ws = weight_scheme(scheme)
    bf16 = StorageDType.bf16
    assert memory.weight_bytes_per_device(card, scheme=ws, activation_dtype=bf16, tp=tp * 2) <= (
        memory.weight_bytes_per_device(card, scheme=ws, activation_dtype=bf16, tp=tp)
    )


@given(budget=st.integers(-(1 << 40), 1 << 44), per_seq=st.integers(1, 1 << 34))
def test_max_concurrency_bracket(budget, per_seq) -> None:
    n = memory.max_concurrent_sequences(budget, per_sequence_bytes=per_seq)
    assert n >= 0
    if budget >= 0:
        assert n * per_seq <= budget < (n + 1) * per_seq
    else:
        assert n == 0


@given(
    budget=st.integers(0, 1 << 42),
    batch=st.integers(1, 512),
    per_token=st.integers(1, 1 << 20),
    state=st.integers(0, 1 << 28),
    block=st.sampled_from([16, 128]),
)
def test_max_seq_len_fits_and_next_block_does_not(budget, batch, per_token, state, block) -> None:
    length = memory.max_seq_len_at_batch(
        budget, batch=batch, kv_bytes_per_token=per_token, state_bytes=state, block_size_tokens=block
    )
    assert length % block == 0

    def fits(tokens: int) -> bool:
        per_seq = memory.sequence_bytes(
            tokens, kv_bytes_per_token=per_token, state_bytes=state, block_size_tokens=block
        )
        return batch * per_seq <= budget

    if length > 0:
        assert fits(length)
    assert not fits(length + block)


@given(n=st.integers(1, 1 << 20))
def test_token_parsing_round_trips(n) -> None:
    assert units.parse_tokens(str(n)) == n
    assert units.parse_tokens(f"{n}k") == n * 1024
    assert units.parse_tokens(f"{n}K") == n * 1024


@given(gib=st.floats(0.001, 4096, allow_nan=False))
def test_gib_round_trip(gib) -> None:
    assert abs(units.bytes_to_gib(units.gib_to_bytes(gib)) - gib) < 1e-9 * max(gib, 1)
