"""Prefill/decode disaggregation: P prefill instances hand each request's KV to one of D decode instances.

A request arrives at a prefill instance (round robin in arrival order), is prefilled there (the instance's
own scheduler with prefill batches, outputs cut to one token), its KV cache moves over the link
(`kv_transfer_s`), and it joins a decode instance (round robin in order of arrival there) that only decodes:
admission needs its blocks and a batch slot, then it decodes as in the aggregated engine. TTFT: vLLM
(decoder_emits_first) = prefill + KV pull + decode admission wait + one decode step, the user's first token
coming from the decoder; MindIE: the end of the prefill [assumed].
The link is the card's interconnect unless --kv-link-gbps gives the RoCE bandwidth between nodes (P and D
usually sit on different nodes). Not modelled: the seed's in-process prefill/decode separation on one card
(its P95 TTFT 1.05 -> 0.63 s). MindIE's supportSelectBatch and templateType have no effect under PD
(facts 1.2).
Transfers do not contend with each other.
`simulate_pd` runs the two sides one after the other: open loop and no back-pressure (a prefill instance
never waits for decode blocks to free; its KV leaves at once). `kvplan simulate --pd` runs
planner/sim/pdloop.py instead (all instances together: back-pressure, closed loops), which equals this
reference while the decode instances keep up (tests/test_sim_pdloop.py). The fleet (PdSpec, spec_for) and
the KV transfer time are planner/sim/pdspec.py, shared by both.
"""

from __future__ import annotations

import numpy as np

from planner.arrays import FloatArray, IntArray
from planner.deployment import Deployment
from planner.engines import registry
from planner.errors import PlanInputError
from planner.perf import roofline
from planner.sim import instance, run
from planner.sim.config import SchedulerConfig
from planner.sim.engine import Engine
from planner.sim.metrics import Records
from planner.sim.pdspec import PdSpec, decoder_emits_first, kv_transfer_s
from planner.sim.workload import Workload


def subset(work: Workload, index: IntArray, *, arrival_s: FloatArray, output: IntArray) -> Workload:
    """The requests `index` with the given arrivals and outputs, sorted by arrival."""
    order = index[np.argsort(arrival_s[index], kind="stable")]
    return Workload(work.input_tokens[order], output[order], arrival_s=arrival_s[order], concurrency=None)


def run_side(
    dep: Deployment, work: Workload, *, instances: int, arrival_s: FloatArray, knobs: dict[str, object]
) -> tuple[list[tuple[IntArray, Engine]], SchedulerConfig]:
    """Round-robin the requests (in order of arrival_s) over `instances` engines (an instance's DP groups
    counted one each, as pdloop.engines_for) and run each."""
    order = np.argsort(arrival_s, kind="stable")
    runs = []
    cfg = run.default_config(dep, workload=work, **run.group_knobs(dep, knobs))
    table = run.build_table(dep, cfg, work)
    for number in range(instances):
        index = order[number::instances]
        if index.size == 0:
            continue
        output = work.output_tokens if cfg.scheduler == "decode" else np.ones_like(work.output_tokens)
        part = subset(work, index, arrival_s=arrival_s, output=output)
        emits = cfg.scheduler == "decode" and registry.decoder_streams_first_token(dep.engine)
        eng = instance.run_engine(cfg, table, part, emits_first=emits)
        runs.append((index[np.argsort(arrival_s[index], kind="stable")], eng))
    return runs, cfg


def gather(runs: list[tuple[IntArray, Engine]], count: int, field: str) -> FloatArray:
    """Per-request values of an engine field (first / finish / preempted) back in request order."""
    values = np.zeros(count)
    for index, eng in runs:
        values[index] = np.asarray(getattr(eng, field), dtype=np.float64)
    return values


def simulate_pd(
    spec: PdSpec, work: Workload, *, slo: tuple[float | None, float | None], knobs: dict[str, object]
) -> instance.SimResult:
    """Open-loop workload through the P:D fleet -> the same summary as one aggregated instance."""
    if work.arrival_s is None:
        raise PlanInputError(
            "--pd: a closed loop (--concurrency) is not simulated with --pd; use --rate or --trace"
        )
    count = work.requests
    prefill, _ = run_side(
        spec.prefill, work, instances=spec.prefill_groups, arrival_s=work.arrival_s, knobs=knobs
    )
    prefilled = gather(prefill, count, "finish")
    ready = prefilled + kv_transfer_s(spec, prompt_tokens=work.input_tokens)
    decode_knobs = {**knobs, "scheduler": "decode"}
    decode, cfg = run_side(
        spec.decode, work, instances=spec.decode_groups, arrival_s=ready, knobs=decode_knobs
    )
    records = Records(
        arrival_s=work.arrival_s,
        input_tokens=work.input_tokens,
        output_tokens=work.output_tokens,
        first_token_s=gather(decode, count, "first") if decoder_emits_first(spec) else prefilled,
        finish_s=gather(decode, count, "finish"),
        preemptions=(gather(prefill, count, "preempted") + gather(decode, count, "preempted")).astype(
            np.int64
        ),
    )
    stats, timeline = instance.fleet_stats(
        records, [eng for _, eng in decode], prefill_tokens=sum(eng.prefill_tokens for _, eng in prefill)
    )
    calibrated = roofline.is_calibrated(spec.decode)
    summary = instance.summary_of(records, stats, cfg=cfg, calibrated=calibrated, slo=slo)
    return instance.SimResult(summary=summary, records=records, timeline=timeline)
