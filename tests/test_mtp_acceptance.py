"""MTP acceptance read two ways: kvplan's chained per-draft acceptance and vLLM's accepted / drafted share."""

from __future__ import annotations

import pytest

from planner.perf.mtp import chained_acceptance, speculative_tokens_per_step


@pytest.mark.parametrize("drafts", [2, 3, 5])
@pytest.mark.parametrize("share", [0.2, 0.513, 0.642, 0.95])
def test_chained_acceptance_gives_vllms_mean_acceptance_length(drafts: int, share: float) -> None:
    """vLLM's mean acceptance length is 1 + k x (accepted / drafted); the converted acceptance gives it."""
    a = chained_acceptance(drafts, accepted_share=share)
    assert 0.0 < a < 1.0
    tokens = speculative_tokens_per_step(drafts, acceptance_fraction=a)
    assert tokens == pytest.approx(1 + drafts * share, abs=1e-9)
    # reading the share as the chained acceptance undercounts the tokens per step
    assert speculative_tokens_per_step(drafts, acceptance_fraction=share) < 1 + drafts * share


def test_one_draft_and_full_acceptance_read_the_same_either_way() -> None:
    assert chained_acceptance(1, accepted_share=0.896) == 0.896
    assert chained_acceptance(3, accepted_share=1.0) == 1.0


def test_the_a3_row_of_three_drafts() -> None:
    """Corpus line 171: 64.2 % with 3 drafts and a published mean acceptance length of 2.93."""
    a = chained_acceptance(3, accepted_share=0.642)
    assert speculative_tokens_per_step(3, acceptance_fraction=a) == pytest.approx(2.93, abs=0.005)
    assert speculative_tokens_per_step(3, acceptance_fraction=0.642) == pytest.approx(2.32, abs=0.005)
