"""The longest sequence a batch leaves room for (capacity.longest_at_batch) is the engine's own answer: the
plan at that length holds the batch, one block longer does not (h67: "344 sequences of 384 tokens do not
fit ... at 344 the longest sequence is 384 tokens", from a byte formula without MindIE's kept blocks)."""

from __future__ import annotations

import pytest

from planner import capacity
from planner.errors import DoesNotFitError
from tests.helpers import deployment_950pr


def plan_holds(model: str, engine: str, mtp: int, *, ctx: int, batch: int) -> bool:
    dep = deployment_950pr(model, engine=engine, ctx_tokens=ctx, batch=batch, mtp_tokens=mtp)
    try:
        capacity.memory_plan(dep)
    except DoesNotFitError:
        return False
    return True


@pytest.mark.parametrize(
    ("model", "engine", "mtp"),
    [("qwen3.5-27b", "mindie", 0), ("qwen3.5-27b", "mindie", 1), ("qwen3-8b", "vllm", 0)],
)
def test_the_plan_holds_the_batch_at_the_longest_length_and_not_a_block_more(
    model: str, engine: str, mtp: int
) -> None:
    dep = deployment_950pr(model, engine=engine, ctx_tokens=384, mtp_tokens=mtp)
    mem, rec = capacity.memory_plan(dep)
    batch = rec.max_batch_size + 1  # one more than the plan holds at 384 tokens
    longest = capacity.longest_at_batch(dep.model_copy(update={"batch": batch}), mem)
    assert 0 < longest < 384
    assert plan_holds(model, engine, mtp, ctx=longest, batch=batch)
    assert not plan_holds(model, engine, mtp, ctx=longest + dep.block_size_tokens, batch=batch)


def test_a_batch_no_length_holds_says_so() -> None:
    """vLLM pages a hybrid model's state per request: no shorter sequence makes room (longest 0)."""
    dep = deployment_950pr("qwen3.5-27b", engine="vllm", ctx_tokens=384)
    _, rec = capacity.memory_plan(dep)
    with pytest.raises(DoesNotFitError, match=r"no sequence length leaves room for them"):
        capacity.memory_plan(dep.model_copy(update={"batch": rec.max_batch_size + 1}))
