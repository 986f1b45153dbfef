"""What `kvplan simulate` was asked, typed (planner/cli/simulate.py builds it from the flags and runs it, the
searches in planner/cli/simsearch.py read it), and the checks of which flags go together."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from planner import kinds
from planner.errors import PlanInputError
from planner.inputs import PlanRequest, ms_to_s


@dataclass(frozen=True)
class SchedulerFlags:
    """The scheduler knobs as typed (None: the engine default); scheduler_knobs() checks and converts them."""

    max_batch: int | None = None
    max_batched_tokens: int | None = None
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

    def slo_s(self) -> tuple[float | None, float | None]:
        """(TTFT, TPOT) SLOs in seconds, each None or > 0."""
        return ms_to_s(self.ttft_ms, "--ttft-ms"), ms_to_s(self.tpot_ms, "--tpot-ms")


def check_flag_combinations(flags: SimulateRequest, *, out: Path | None, timeline_out: Path | None) -> None:
    """A flag that this run would not use is an error, never silently ignored."""
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
