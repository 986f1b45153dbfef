"""MindIE's maxBatchSize ceiling: the engine's own check per config layout (--mindie-version), lowered on a
card whose profile documents a smaller range (HardwareProfile.mindie_max_batch_size, sourced in the card's
YAML). maxPrefillBatchSize lies in [1, maxBatchSize] and maxPreemptCount in [0, maxBatchSize] (rules.py).

MIE = MindIE-LLM (mirror /work/.mirror/Ascend+MindIE-LLM); CPP = its src/config_manager/schedule_config.cpp;
DOC = its docs/zh/user_guide/user_manual/service_parameter_configuration.md.
"""

from __future__ import annotations

from typing import Any

from planner.results import Plan

# The 2.x layout mirrors MIE master @8b4871a: CPP:274 CheckMaxMinValue(maxBatchSize, 819200U, 1U) and
# DOC:150 "[1, 819200]" (@8b4871a); raised from 5000 by MIE 2407474 (2026-03-05, "BeamSearch ... 放开校验").
MAX_BATCH_SIZE_2X = 819_200
# The 1.0.RC3 layout (1.0.RC3 - 2.1): CPP:239 CheckMaxMinValue(maxBatchSize, 5000U, 1U) and DOC:141
# "[1, 5000]" @40fb063 (2025-12-22, the mirror's oldest snapshot; still so in tag 3.0.0.beta.1 @5e89619).
# [assumed: the RC3 - 2.1 releases predate that snapshot and kept its 5000; their own docs were not read]
MAX_BATCH_SIZE_RC3 = 5000
MAX_BATCH_SIZE_BY_LAYOUT = {"2.x": MAX_BATCH_SIZE_2X, "1.0.RC3": MAX_BATCH_SIZE_RC3}
DEFAULT_LAYOUT = "2.x"  # the plan, serve, simulate and the dashboard size for the default layout
MAX_BATCH_SIZE = max(MAX_BATCH_SIZE_BY_LAYOUT.values())  # no layout's engine takes more (rules.RANGE_RULES)


def max_batch_size(*, layout: str, card_cap: int | None) -> int:
    """maxBatchSize's upper bound: min(the layout's engine limit, the card's documented one when set)."""
    engine = MAX_BATCH_SIZE_BY_LAYOUT[layout]
    return engine if card_cap is None else min(engine, card_cap)


def layout_held(plan: Plan, *, layout: str) -> tuple[Plan, list[str]]:
    """The plan with its per-DP-group batch lowered to the layout's engine limit when above it (the plan
    sizes for DEFAULT_LAYOUT), and the note saying so; unchanged (no note) otherwise."""
    cap = max_batch_size(layout=layout, card_cap=None)
    batch = plan.batch_per_dp_group
    if batch <= cap:
        return plan, []
    dp = plan.layout.dp if plan.layout is not None else 1
    total = min(plan.recommendation.max_batch_size, cap * dp)
    update: dict[str, Any] = {
        "recommendation": plan.recommendation.model_copy(
            update={"max_batch_size": total, "binding_constraint": "engine limit"}
        )
    }
    if plan.layout is not None:
        update["layout"] = plan.layout.model_copy(update={"batch_per_dp_group": cap})
    note = (
        f"maxBatchSize {cap}, not the plan's {batch}: the {layout} layout's MindIE takes at most {cap} "
        f"(schedule_config.cpp CheckMaxMinValue; the plan sizes for the {DEFAULT_LAYOUT} layout's "
        f"{MAX_BATCH_SIZE_BY_LAYOUT[DEFAULT_LAYOUT]})"
    )
    return plan.model_copy(update=update), [note]
