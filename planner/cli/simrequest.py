"""What `kvplan simulate` was asked, typed (planner/cli/simulate.py builds it from the flags and runs it, the
searches in planner/cli/simsearch.py read it), and the checks of which flags go together."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planner import kinds, units
from planner.errors import PlanInputError
from planner.inputs import PlanRequest, ms_to_s


@dataclass(frozen=True)
class SchedulerFlags:
    """The scheduler knobs as typed (None: the engine default); check_knobs checks them, scheduler_knobs
    converts them."""

    max_batch: int | None = None
    max_prefill_batch: int | None = None
    max_prefill_tokens: int | None = None
    select_batch: bool = False
    prefill_time_ms_per_req: float | None = None
    decode_time_ms_per_req: float | None = None
    queue_delay_us: float | None = None


@dataclass(frozen=True)
class SimulateRequest:
    """What `kvplan simulate` was asked, typed: the deployment (PlanRequest; its ctx and prefill are sized
    from the workload), the workload, the SLOs, the scheduler knobs, the P:D split and the search."""

    request: PlanRequest
    rate: float | None = None
    concurrency: int | None = None
    trace: Path | None = None
    lengths: tuple[str, str] = (str(kinds.DEFAULT_INPUT_TOKENS), str(kinds.DEFAULT_OUTPUT_TOKENS))
    requests: int = 1000
    ctx: str | None = None  # --ctx: the engine's context length (None: the longest request)
    seed: int = 0
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    knobs: SchedulerFlags = SchedulerFlags()
    pd: str | None = None
    prefill_tp: int | None = None
    prefill_dp: int | None = None
    prefill_ep: int | None = None
    kv_link_gbps: float | None = None
    search: str | None = None
    quantile: str = "p99"
    typed: frozenset[str] = frozenset()  # the parameters given on the command line (check_trace_flags)

    def slo_s(self) -> tuple[float | None, float | None]:
        """(TTFT, TPOT) SLOs in seconds, each None or > 0."""
        return ms_to_s(self.ttft_ms, "--ttft-ms"), ms_to_s(self.tpot_ms, "--tpot-ms")


SEARCHES = ("max-rate", "max-concurrency", "knee", "pd")  # --search (planner/cli/simsearch.py)
# --max-batch, --max-prefill-batch: the simulator's step table (planner/sim/run.py step_table) holds one row
# per running-batch size (x ~50-80 contexts), so it steps at most this many: the simulator's own limit (equal
# to the maxBatchSize kvplan writes for MindIE: planner/engines/mindie/limits.py; registry.check_batch_cap
# refuses a --max-batch above an engine's own). The plan's --batch range is inputs.MAX_BATCH.
SIM_MAX_BATCH = 5000
MAX_SEED = 2**63 - 1  # numpy's default_rng takes any non-negative int; a signed 64-bit one is ample


def check_knobs(flags: SimulateRequest) -> None:
    """--max-batch in the plan's --batch range (inputs.check_batch), then within what the simulator steps;
    --max-prefill-batch 1..SIM_MAX_BATCH; --seed 0..MAX_SEED: one line naming the flag, value and limit."""
    from planner import inputs

    knobs = flags.knobs
    inputs.check_batch(knobs.max_batch, "--max-batch")
    if knobs.max_batch is not None and knobs.max_batch > SIM_MAX_BATCH:
        raise PlanInputError(
            f"--max-batch: more than the simulator steps (got {knobs.max_batch}, expected <= "
            f"{SIM_MAX_BATCH}: its step table holds one row per running-batch size)"
        )
    prefill_batch = knobs.max_prefill_batch
    if prefill_batch is not None and not 1 <= prefill_batch <= SIM_MAX_BATCH:
        raise PlanInputError(
            f"--max-prefill-batch: out of range (got {prefill_batch}, expected 1..{SIM_MAX_BATCH}, the "
            "simulator's limit)"
        )
    if not 0 <= flags.seed <= MAX_SEED:
        raise PlanInputError(f"--seed: out of range (got {flags.seed}, expected 0..{MAX_SEED})")
    for key, limits in TIME_KNOBS.items():  # within MindIE's ranges (facts 1.2), NaN refused
        value = getattr(knobs, key)
        if value is not None:
            inputs.bounded(value, "--" + key.replace("_", "-"), limits)


TIME_KNOBS = {
    "prefill_time_ms_per_req": (0, 1000),
    "decode_time_ms_per_req": (0, 1000),
    "queue_delay_us": (0, 1e6),
}


def scheduler_knobs(knobs: SchedulerFlags, *, budget: int, chunks: bool) -> dict[str, Any]:
    """SchedulerConfig keywords from the checked flags (None: the engine default), in SI units.
    --max-prefill-tokens given: the deployment's prefill `budget` (as raised for the plan: MindIE's >=
    maxInputTokenLen) is the one the engine's scheduler reads: a chunking engine's max_batched_tokens
    (`chunks`: vLLM max_num_batched_tokens, SGLang chunked_prefill_size), MindIE's max_prefill_tokens."""
    prefill_ms, decode_ms = knobs.prefill_time_ms_per_req, knobs.decode_time_ms_per_req
    given = knobs.max_prefill_tokens is not None
    return {
        "max_batch": knobs.max_batch,
        "max_batched_tokens": budget if given and chunks else None,
        "max_prefill_batch": knobs.max_prefill_batch,
        "max_prefill_tokens": budget if given and not chunks else None,
        "select_batch": knobs.select_batch,
        "prefill_time_per_req_s": None if prefill_ms is None else prefill_ms * units.MS_S,
        "decode_time_per_req_s": None if decode_ms is None else decode_ms * units.MS_S,
        "queue_delay_s": None if knobs.queue_delay_us is None else knobs.queue_delay_us * units.US_S,
    }


def check_trace_flags(flags: SimulateRequest) -> None:
    """With --trace, a typed --input-tokens, --output-tokens, --requests or --seed is refused in one line:
    the trace's rows are the requests, with their own arrivals and token counts (nothing is drawn)."""
    if flags.trace is None:
        return
    given = {
        "input_tokens": ("--input-tokens", flags.lengths[0]),
        "output_tokens": ("--output-tokens", flags.lengths[1]),
        "requests": ("--requests", flags.requests),
        "seed": ("--seed", flags.seed),
    }
    for name, (flag, value) in given.items():
        if name in flags.typed:
            raise PlanInputError(
                f"{flag}: not used with --trace (got {value} beside --trace {flags.trace}, expected "
                "one or the other: the trace's rows are the requests, with their arrivals and token counts)"
            )


def check_flag_combinations(flags: SimulateRequest, *, out: Path | None, timeline_out: Path | None) -> None:
    """A flag that this run would not use is an error, never silently ignored; the knobs' ranges."""
    check_knobs(flags)
    check_trace_flags(flags)
    if flags.search is not None:
        for flag, path in (("--out", out), ("--timeline-out", timeline_out)):
            if path is not None:
                raise PlanInputError(
                    f"{flag}: not written with --search (got {flag} {path}, expected no {flag}); "
                    f"simulate the rate --search finds to get its records"
                )
    if flags.pd is None:
        for flag, value in (*prefill_flags(flags).items(), ("--kv-link-gbps", flags.kv_link_gbps)):
            if value is not None:
                raise PlanInputError(
                    f"{flag}: only used with --pd (got {flag} {value} without --pd, expected --pd P:D too)"
                )


PREFILL_DEGREE_RANGE = (1, 64)  # as --tp's: a prefill instance's tp, dp or ep


def prefill_flags(flags: SimulateRequest) -> dict[str, int | None]:
    """--prefill-tp/-dp/-ep as given (None: the decode instances' --tp/--dp/--ep)."""
    return {
        "--prefill-tp": flags.prefill_tp,
        "--prefill-dp": flags.prefill_dp,
        "--prefill-ep": flags.prefill_ep,
    }


def check_pd_flags(flags: SimulateRequest) -> None:
    """--prefill-tp/-dp/-ep each in PREFILL_DEGREE_RANGE, --kv-link-gbps in (1e-3, 1e6) GB/s; the fleet they
    describe is planner/sim/pdspec.spec_for (decode: --tp/--dp/--ep; prefill: the same where not given)."""
    from planner import inputs

    low, high = PREFILL_DEGREE_RANGE
    for flag, value in prefill_flags(flags).items():
        if value is not None and not low <= value <= high:
            raise PlanInputError(f"{flag}: out of range (got {value}, expected {low}..{high})")
    if flags.kv_link_gbps is not None:
        inputs.bounded(flags.kv_link_gbps, "--kv-link-gbps", (1e-3, 1e6))


def input_files(flags: SimulateRequest) -> dict[str, Path | None]:
    """The files this run reads (flag -> path): no output may replace one of them."""
    files: dict[str, Path | None] = {"--trace": flags.trace}
    for flag, value in zip(("--input-tokens", "--output-tokens"), flags.lengths, strict=True):
        if value.startswith("empirical:"):
            files[flag] = Path(value.removeprefix("empirical:"))
    return files
