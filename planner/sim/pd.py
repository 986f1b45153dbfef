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
reference while the decode instances keep up (tests/test_sim_pdloop.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner import capacity, memory, units
from planner.deployment import Deployment
from planner.engines import registry
from planner.errors import PlanInputError
from planner.perf import roofline
from planner.sim import instance, metrics, run
from planner.sim.config import SchedulerConfig
from planner.sim.engine import Engine
from planner.sim.metrics import Records
from planner.sim.workload import FloatArray, IntArray, Workload

MAX_INSTANCES = 64  # per side: a larger fleet is a typo (and each instance is simulated on its own)


@dataclass(frozen=True)
class PdSpec:
    """P prefill and D decode instances (each a deployment of its own tp) and the KV link between them."""

    prefill: Deployment
    decode: Deployment
    prefill_instances: int
    decode_instances: int
    link_bytes_per_s: float
    link_latency_s: float

    @property
    def devices(self) -> int:
        """Cards in the fleet: P * tp_prefill + D * tp_decode."""
        return self.prefill_instances * self.prefill.tp + self.decode_instances * self.decode.tp


def decoder_emits_first(spec: PdSpec) -> bool:
    """True for vLLM: vllm-ascend's P:D proxy sends the prefill instance a copy of the request with
    max_tokens 1 and stream off, keeps only its kv_transfer_params, and streams the user's tokens from the
    decode instance (examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py @93dbfa65:
    send_request_to_service, _handle_completions' generate_stream). So TTFT = prefill + KV pull + decode
    admission + one decode step, and the decoder generates all O tokens. MindIE: its PD first token's source
    is not checked here; TTFT keeps ending at the prefill [assumed]."""
    return registry.decoder_streams_first_token(spec.decode.engine)


def parse_pd(text: str) -> tuple[int, int]:
    """`P:D` -> (P, D), each in 1..MAX_INSTANCES."""
    left, sep, right = str(text).partition(":")
    if not sep or not all(side.strip().isascii() and side.strip().isdigit() for side in (left, right)):
        raise PlanInputError(f"--pd: not a P:D ratio (got {text!r}, expected e.g. 1:2)")
    counts = int(left), int(right)
    if not all(1 <= n <= MAX_INSTANCES for n in counts):
        raise PlanInputError(
            f"--pd: instance counts out of range (got {text!r}, expected 1..{MAX_INSTANCES} each)"
        )
    return counts


def spec_for(
    dep: Deployment, *, counts: tuple[int, int], prefill_tp: int | None, link_gbps: float | None
) -> PdSpec:
    """Both sides from one deployment (prefill_tp overrides the prefill instances' tp); the link is the
    card profile's interconnect unless link_gbps (GB/s per device) is given. Raises DoesNotFitError (exit
    3) when either side cannot hold the model."""
    prefill = dep if prefill_tp is None else dep.model_copy(update={"tp": prefill_tp})
    capacity.memory_plan(dep)
    try:
        capacity.memory_plan(prefill)
    except PlanInputError as exc:  # the prefill side's tp is --prefill-tp, not --tp
        text = str(exc)
        if prefill_tp is None or not text.startswith("--tp:"):
            raise
        raise PlanInputError("--prefill-tp:" + text.removeprefix("--tp:")) from exc
    link = dep.hardware.interconnect
    bandwidth = units.gb_per_s_to_bytes_per_s(link_gbps or link.bandwidth_gb_per_s)
    return PdSpec(
        prefill=prefill,
        decode=dep,
        prefill_instances=counts[0],
        decode_instances=counts[1],
        link_bytes_per_s=bandwidth,
        link_latency_s=units.us_to_s(link.latency_us),
    )


def kv_transfer_s(spec: PdSpec, *, prompt_tokens: IntArray) -> FloatArray:
    """Seconds to move each request's KV from its prefill instance to its decode instance.

    Formula: latency + (paged(prompt) * kv_bytes_per_token + state_bytes) / link bandwidth, per prefill
    device (the tp shards move in parallel, each over its own device's link).
    """
    dep = spec.prefill
    per_token = memory.kv_cache_bytes_per_token(
        dep.model, kv_dtype=dep.kv_dtype, tp=dep.tp, mtp=dep.include_mtp
    )
    state = memory.linear_state_bytes_per_sequence(dep.model, conv_dtype=dep.activation_dtype, tp=dep.tp)
    paged = memory.paged_tokens(prompt_tokens, block_size_tokens=dep.block_size_tokens)
    return spec.link_latency_s + (paged * per_token + state) / spec.link_bytes_per_s


def subset(work: Workload, index: IntArray, *, arrival_s: FloatArray, output: IntArray) -> Workload:
    """The requests `index` with the given arrivals and outputs, sorted by arrival."""
    order = index[np.argsort(arrival_s[index], kind="stable")]
    return Workload(work.input_tokens[order], output[order], arrival_s=arrival_s[order], concurrency=None)


def run_side(
    dep: Deployment, work: Workload, *, instances: int, arrival_s: FloatArray, knobs: dict[str, object]
) -> tuple[list[tuple[IntArray, Engine]], SchedulerConfig]:
    """Round-robin the requests (in order of arrival_s) over `instances` engines and run each."""
    order = np.argsort(arrival_s, kind="stable")
    runs = []
    cfg = run.default_config(dep, workload=work, **knobs)
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
        spec.prefill, work, instances=spec.prefill_instances, arrival_s=work.arrival_s, knobs=knobs
    )
    prefilled = gather(prefill, count, "finish")
    ready = prefilled + kv_transfer_s(spec, prompt_tokens=work.input_tokens)
    decode_knobs = {**knobs, "scheduler": "decode"}
    decode, cfg = run_side(
        spec.decode, work, instances=spec.decode_instances, arrival_s=ready, knobs=decode_knobs
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
    engines = [eng for _, eng in decode]
    timelines = [instance.timeline_of(eng) for eng in engines]
    stats = instance.EngineStats(
        mean_in_system=float(np.sum(records.e2e_s)) / metrics.duration_s(records),
        max_batch_reached=max(eng.max_batch_reached for eng in engines),
        preemptions=int(records.preemptions.sum()),
        kv_peak_fraction=max(float(np.max(t.used_blocks)) / cfg.total_blocks for t in timelines),
        prefill_tokens=sum(eng.prefill_tokens for _, eng in prefill),
    )
    calibrated = roofline.is_calibrated(spec.decode)
    summary = instance.summary_of(records, stats, cfg=cfg, calibrated=calibrated, slo=slo)
    return instance.SimResult(summary=summary, records=records, timeline=timelines[0])
