"""MindIE's maxBatchSize ceiling: the engine's own check in every release kvplan writes for (either
--mindie-version layout), lowered on a card whose profile documents a smaller range
(HardwareProfile.mindie_max_batch_size, sourced in the card's YAML). maxPrefillBatchSize lies in
[1, maxBatchSize] and maxPreemptCount in [0, maxBatchSize] (rules.py).

MIE = MindIE-LLM (mirror /work/.mirror/Ascend+MindIE-LLM); CPP = its src/config_manager/schedule_config.cpp;
DOC = its docs/zh/user_guide/user_manual/service_parameter_configuration.md.
"""

from __future__ import annotations

# MindIE-LLM's own check, CPP CheckMaxMinValue(maxBatchSize, N, 1U): 5000U in every branch up to
# v3.0.0.beta.2 (CPP:259 @f50aff8, 2026-04-08; CPP:239 in tag 3.0.0.beta.1 @5e89619 and in the
# mirror's oldest snapshot @40fb063, whose DOC:141 says "[1, 5000]"), 819200U from 2407474
# (2026-03-05, "BeamSearch规格优化放开校验") on master, v3.0.0.beta.3 and v3.0.0 (@8b4871a, CPP:274,
# DOC:150). A maxBatchSize above 5000 stops every release before 3.0.0.beta.3 at start-up, so kvplan
# writes and accepts at most 5000 whatever the layout (the 1.0.RC3 - 2.1 releases predate the mirror
# and are assumed to check the same 5000): the config starts on any release, at the cost of
# concurrency beyond 5000 sequences, which only tiny models at short contexts reach.
MAX_BATCH_SIZE = 5000


def max_batch_size(*, card_cap: int | None) -> int:
    """maxBatchSize's upper bound: min(MAX_BATCH_SIZE, the card's documented one when set)."""
    return MAX_BATCH_SIZE if card_cap is None else min(MAX_BATCH_SIZE, card_cap)
