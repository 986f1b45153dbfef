"""`kvplan simulate`'s outputs: the per-request records and the timeline as CSV (--out, --timeline-out) and
the printed summary (throughput, tails, their range, verdict). No simulation here: planner/cli/simulate.py
runs it and calls these.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path
from typing import TYPE_CHECKING

from planner import atomic, units

if TYPE_CHECKING:
    from planner.cli.simrequest import SimulateRequest
    from planner.deployment import Deployment
    from planner.perf.ranges import SpeedBand
    from planner.sim.instance import SimResult
    from planner.sim.metrics import SimSummary

CSV_COLUMNS = (
    "request",
    "arrival_s",
    "input_tokens",
    "output_tokens",
    "first_token_s",
    "finish_s",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "preemptions",
)


def records_csv(result: SimResult) -> str:
    """One row per request, SI units."""
    rec = result.records
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    columns = (
        rec.arrival_s, rec.input_tokens, rec.output_tokens, rec.first_token_s, rec.finish_s,
        rec.ttft_s, rec.tpot_s, rec.e2e_s, rec.preemptions,
    )  # fmt: skip
    for index, row in enumerate(zip(*(c.tolist() for c in columns), strict=True)):
        writer.writerow((index, *(f"{v:.6g}" if isinstance(v, float) else v for v in row)))
    return buffer.getvalue()


TIMELINE_COLUMNS = ("time_s", "in_system", "waiting", "batch", "kv_used_fraction")


def timeline_csv(result: SimResult) -> str:
    """The engine's state over time (downsampled to at most 2000 events; decode instance 0 under --pd)."""
    from planner.sim import metrics

    line = metrics.downsampled(result.timeline)
    kv = line.used_blocks / result.summary.scheduler.total_blocks
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(TIMELINE_COLUMNS)
    rows = zip(line.time_s.tolist(), line.in_system.tolist(), line.waiting.tolist(), line.batch.tolist(),
               kv.tolist(), strict=True)  # fmt: skip
    writer.writerows((f"{t:.6g}", n, w, b, f"{k:.4g}") for t, n, w, b, k in rows)
    return buffer.getvalue()


def write_outputs(result: SimResult, *, records: Path | None, timeline: Path | None, force: bool) -> None:
    """--out and --timeline-out, each atomic and never over an existing file without --force."""
    if records is not None:
        atomic.write_atomic(records, records_csv(result), force=force)
    if timeline is not None:
        atomic.write_atomic(timeline, timeline_csv(result), force=force)


def summary_lines(result: SimResult, *, label: str, band: SpeedBand) -> list[str]:
    """Human summary: throughput, latency percentiles, their range, batch, preemptions, goodput, notes."""
    from planner.cli.serve_view import range_line, tail_lines

    s = result.summary
    lines = [
        f"{label}: {s.requests} requests in {s.duration_s:.1f} s ({s.scheduler.scheduler} scheduler, "
        f"{band.source})",
        f"  throughput {units.fmt_tokens_per_s(s.throughput.output_tokens_per_s)} output, "
        f"{s.throughput.requests_per_s:.3g} requests/s; mean in system {s.mean_in_system:.3g}",
    ]
    lines.extend(tail_lines(s))
    lines.append(
        f"  batch reached {s.max_batch_reached} (cap {s.scheduler.max_batch}), KV peak "
        f"{units.fmt_fraction(s.kv_peak_fraction)} of {s.scheduler.total_blocks} blocks, "
        f"{s.preemptions} preemptions"
    )
    lines.append(range_line(s, band))
    lines.append(verdict_line(s))
    if s.goodput_requests_per_s is not None:
        lines.append(f"  goodput {s.goodput_requests_per_s:.3g} requests/s meeting the SLOs")
    return lines + [f"note: {note}" for note in printed_notes(s, band)]


def printed_notes(summary: SimSummary, band: SpeedBand) -> list[str]:
    """The notes under a run's figures, the text's `note:` lines and the --json `notes`: the run's own (what
    reading the workload or the engine changed, P:D's), then the speed band's."""
    return [*summary.notes, *band.notes]


def verdict_line(s: SimSummary) -> str:
    """'verdict: overloaded ...' when the queue grows without bound (metrics.overload), else 'stable'."""
    if s.overloaded:
        return (
            f"  verdict: OVERLOADED: the queue grows without bound ({s.backlog_at_last_arrival} of "
            f"{s.requests} requests still in the system at the last arrival, TTFT growing with arrival "
            "time); the tails above grow with --requests: lower --rate or add capacity"
        )
    return f"  verdict: stable ({s.backlog_at_last_arrival} requests in the system at the last arrival)"


def simulation_label(
    model: str,
    *,
    card: str,
    pd: str | None,
    degrees: tuple[int, int, int, int],
    prefill: tuple[int | None, int | None, int | None] = (None, None, None),
) -> str:
    """'MODEL on CARD, <layout.describe>[, P:D p:d[ (prefill <layout>)]]': the summary's heading (degrees:
    tp, dp, ep, pp; prefill: --prefill-tp/-dp/-ep, None where the decode's; named when one differs)."""
    from planner import layout
    from planner.degrees import Degrees

    tp, dp, ep, pp = degrees
    parallel = layout.describe(Degrees(tp=tp, dp=dp, ep=ep, pp=pp))
    label = f"{model} on {card}, {parallel}" + (f", P:D {pd}" if pd else "")
    own = tuple(
        mine if mine is not None else theirs for mine, theirs in zip(prefill, (tp, dp, ep), strict=True)
    )
    if pd and own != (tp, dp, ep):
        label += f" (prefill {layout.describe(Degrees(tp=own[0], dp=own[1], ep=own[2], pp=pp))})"
    return label


def with_notes(
    result: SimResult, flags: SimulateRequest, dep: Deployment, *, read: tuple[str, ...] = ()
) -> SimResult:
    """The result with the notes of what reading the workload changed (`read`: a trace's rows sorted by
    arrival), the note the plan prints when the engine raised --max-prefill-tokens
    (common.raised_prefill_notes: MindIE's maxPrefillTokens >= maxInputTokenLen) and, --max-batch not
    given, the one when the prefill budget held the engine's default running limit down
    (registry.batch_cap_notes: vLLM's max_num_seqs <= max_num_batched_tokens)."""
    from planner.engines import registry
    from planner.engines.common import raised_prefill_notes

    notes = [*read, *raised_prefill_notes(flags.knobs.max_prefill_tokens, used=dep.max_prefill_tokens)]
    if flags.knobs.max_batch is None:
        default = registry.default_max_batch(dep, planned_batch=result.summary.scheduler.max_batch)
        notes += registry.batch_cap_notes(dep, wanted=default, what="the engine's default is")
    if not notes:
        return result
    summary = result.summary.model_copy(update={"notes": (*result.summary.notes, *notes)})
    return dataclasses.replace(result, summary=summary)
