"""MindIE's prefill/decode times per request (prefillTimeMsPerReq, decodeTimeMsPerReq) from the plan's
roofline, whether supportSelectBatch may use them, and the advice on both (planner/engines/mindie/config.py
writes them)."""

from __future__ import annotations

from planner import units
from planner.engines.mindie import scheduler
from planner.results import Plan

MAX_MS = scheduler.MAX_TIME_PER_REQ_MS


def schedule_times_ms(plan: Plan) -> tuple[int, int] | None:
    """(prefillTimeMsPerReq, decodeTimeMsPerReq) from the roofline, clamped to MindIE's [0, 1000] ms.

    prefill: TTFT of one prompt of maxInputTokenLen (the plan's prompt_tokens); decode: one decode step at
    maxBatchSize (MindIE charges decodeTimeMsPerReq per idle batch slot per step). None without a roofline.
    """
    perf = plan.performance
    if perf is None:
        return None
    prefill_ms = min(round(units.s_to_ms(perf.ttft_s)), MAX_MS)
    return prefill_ms, min(round(units.s_to_ms(perf.decode_step_s)), MAX_MS)


def select_batch(plan: Plan) -> bool:
    """supportSelectBatch: true only with calibrated roofline times within MindIE's 1000 ms. MindIE weighs
    prefills against decodes with prefill/decodeTimeMsPerReq; an uncalibrated or clamped prefill time
    (a long maxInputTokenLen prompt past 1000 ms) misstates that weight and can starve prefills."""
    perf = plan.performance
    if perf is None or not perf.calibrated:
        return False
    return max(units.s_to_ms(perf.ttft_s), units.s_to_ms(perf.decode_step_s)) <= MAX_MS


def step_time_notes(plan: Plan) -> list[str]:
    """Advice on the config's prefill/decode times (MindIE's defaults, supportSelectBatch, clamping)."""
    notes = []
    if plan.performance is None:
        notes.append(
            "prefill/decode times: no roofline available, MindIE defaults 150/50 ms kept and "
            "supportSelectBatch left false"
        )
    else:
        if not plan.performance.calibrated:
            notes.append(
                "supportSelectBatch false: prefill/decode times are uncalibrated roofline estimates, and "
                "MindIE's batch selection weighs them (a wrong prefill time starves prefills); "
                "run `kvplan calibrate` to enable it"
            )
        perf = plan.performance
        if units.s_to_ms(max(perf.ttft_s, perf.decode_step_s)) > MAX_MS:
            notes.append(
                f"roofline prefill or decode time above 1000 ms (prefill of a {perf.ttft_prompt_tokens}-"
                f"token prompt: {units.fmt_duration(perf.ttft_s)}): clamped to MindIE's maximum, so "
                "supportSelectBatch stays false (a clamped time misstates the prefill/decode weight)"
            )
        times = schedule_times_ms(plan)
        if select_batch(plan) and times is not None:
            notes.append(
                f"supportSelectBatch true with prefill/decode {times[0]} / {times[1]} ms: `kvplan serve` and "
                "`kvplan simulate` run MindIE's defaults (false, 150 / 50 ms); `kvplan simulate "
                f"--select-batch --prefill-time-ms-per-req {times[0]} --decode-time-ms-per-req {times[1]}` "
                "runs this config's"
            )
    return notes
