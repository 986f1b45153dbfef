"""Attention data parallel in the simulator (`kvplan simulate --dp D`): one instance of D DP groups.

Each DP group serves its own sequences with its own KV (planner/layout.py): requests go round robin in
arrival order to the D groups (a closed loop of K users: K / D per group, the remainder to the first
groups, each with requests in proportion to its users), and each group is one simulated engine with the
deployment's per-rank KV pool, a batch cap of ceil(instance cap / D) (layout.per_dp_rank_batch) and the
roofline's step of one DP group (the ledger already sends every group's tokens through the experts, split
--ep ways). Assumed: the groups do not wait for each other; in a real MoE engine the dispatch couples
their steps, so with uneven loads this is optimistic. The summary is the instance's: all requests,
max_batch_reached and kv_peak_fraction the largest over the groups.
"""

from __future__ import annotations

import numpy as np

from planner import capacity, layout
from planner.deployment import Deployment
from planner.perf import roofline
from planner.sim import metrics, run
from planner.sim.engine import Engine
from planner.sim.metrics import Records
from planner.sim.workload import IntArray, Workload


def group_ids(work: Workload, *, dp: int) -> list[tuple[IntArray, int | None]]:
    """(request ids, users) of each DP group. Open loop: round robin in arrival order. Closed loop of K
    users: K / D users per group (the remainder to the first groups), and request ids in proportion to its
    users (contiguous), so the groups run for about as long."""
    count = work.requests
    if work.concurrency is None or work.arrival_s is not None:
        order = np.argsort(work.arrival_s if work.arrival_s is not None else np.arange(count), kind="stable")
        return [(order[group::dp], None) for group in range(dp)]
    users = [work.concurrency // dp + (group < work.concurrency % dp) for group in range(dp)]
    ends = np.cumsum([count * u // work.concurrency for u in users])
    ends[-1] = count
    starts = np.concatenate([[0], ends[:-1]])
    return [(np.arange(lo, hi), max(u, 1)) for lo, hi, u in zip(starts, ends, users, strict=True)]


def group_workloads(work: Workload, *, dp: int) -> list[tuple[IntArray, Workload]]:
    """(request ids, workload) of each DP group (group_ids); groups left without requests are dropped."""
    parts = []
    for index, users in group_ids(work, dp=dp):
        if index.size == 0:
            continue
        arrival = None if work.arrival_s is None else work.arrival_s[index]
        parts.append((index, Workload(work.input_tokens[index], work.output_tokens[index], arrival, users)))
    return parts


def run_groups(dep: Deployment, work: Workload, *, knobs: dict[str, object]) -> list[tuple[IntArray, Engine]]:
    """One engine per DP group, each run to completion on its share of the requests."""
    _, rec = capacity.memory_plan(dep)
    cap = layout.per_dp_rank_batch(rec.max_batch_size, dp=dep.dp)
    group_knobs = {"max_batch": cap, **{k: v for k, v in knobs.items() if v is not None}}
    runs = []
    for index, part in group_workloads(work, dp=dep.dp):
        cfg = run.default_config(dep, workload=part, **group_knobs)
        run.check_config(cfg, workload=part)
        runs.append((index, run.run_engine(cfg, run.build_table(dep, cfg, part), part)))
    return runs


def simulate_dp(
    dep: Deployment, work: Workload, *, slo: tuple[float | None, float | None], knobs: dict[str, object]
) -> run.SimResult:
    """The workload through the instance's DP groups (module docstring) -> one summary for the instance."""
    runs = run_groups(dep, work, knobs=knobs)
    columns = {
        name: np.zeros(work.requests) for name in ("arrival_s", "first_token_s", "finish_s", "preemptions")
    }
    for index, eng in runs:
        local = run.records_of(eng)
        for name, values in columns.items():
            values[index] = getattr(local, name)
    records = Records(
        arrival_s=columns["arrival_s"],
        input_tokens=work.input_tokens,
        output_tokens=work.output_tokens,
        first_token_s=columns["first_token_s"],
        finish_s=columns["finish_s"],
        preemptions=columns["preemptions"].astype(np.int64),
    )
    timelines = [run.timeline_of(eng) for _, eng in runs]
    stats = run.EngineStats(
        mean_in_system=float(np.sum(records.e2e_s)) / metrics.duration_s(records),
        max_batch_reached=max(eng.max_batch_reached for _, eng in runs),
        preemptions=int(records.preemptions.sum()),
        kv_peak_fraction=max(
            float(np.max(t.used_blocks)) / eng.cfg.total_blocks
            for t, (_, eng) in zip(timelines, runs, strict=True)
        ),
        prefill_tokens=sum(eng.prefill_tokens for _, eng in runs),
    )
    cfg = runs[0][1].cfg
    summary = run.summary_of(records, stats, cfg=cfg, calibrated=roofline.is_calibrated(dep), slo=slo)
    return run.SimResult(summary=summary, records=records, timeline=timelines[0])
