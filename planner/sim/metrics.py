"""Per-request records of a simulation -> latency percentiles, throughput, goodput, mean in system.

TTFT = first token - arrival; TPOT = (finish - first token) / (output - 1) (0 for one-token outputs);
end-to-end = finish - arrival. Percentiles are numpy's linear-interpolated ones. Goodput counts the
requests that meet every given SLO (TTFT <= ttft_s and TPOT <= tpot_s) per second of the run.
mean_in_system is measured independently of the records: the time average of the engine's own count of
requests in the system (arrived, not finished), sampled at every engine event, so Little's law
(mean_in_system = arrival rate * mean end-to-end) is a check on the simulator, not an identity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.arrays import FloatArray, IntArray
from planner.schema import Frozen
from planner.sim.config import SchedulerConfig

QUANTILES = (50, 90, 95, 99)
MAX_TIMELINE_POINTS = 2000  # points of the over-time series returned (downsampled)


class Percentiles(Frozen):
    """Mean and percentiles of one latency (seconds)."""

    mean: float
    p50: float
    p90: float
    p95: float
    p99: float


class Throughput(Frozen):
    """Completed work per second of the run."""

    output_tokens_per_s: float
    requests_per_s: float
    total_tokens_per_s: float


@dataclass(frozen=True)
class Records:
    """One row per request (numpy columns, request id = index)."""

    arrival_s: FloatArray
    input_tokens: IntArray
    output_tokens: IntArray
    first_token_s: FloatArray
    finish_s: FloatArray
    preemptions: IntArray

    @property
    def ttft_s(self) -> FloatArray:
        """Time to first token of each request."""
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> FloatArray:
        """Time per output token after the first: (finish - first) / (output - 1); 0 for one token."""
        steps = np.maximum(self.output_tokens - 1, 1)
        return np.where(self.output_tokens > 1, (self.finish_s - self.first_token_s) / steps, 0.0)

    @property
    def tpot_sample_s(self) -> FloatArray:
        """TPOT of the requests that generated more than one token: the sample TPOT statistics are taken
        over, as `vllm bench serve` does (a one-token request has no time between tokens; its 0 would pull
        the mean and the percentiles down)."""
        return self.tpot_s[self.output_tokens > 1]

    @property
    def e2e_s(self) -> FloatArray:
        """Arrival to last token."""
        return self.finish_s - self.arrival_s


@dataclass(frozen=True)
class Timeline:
    """The engine's state after each event: time, requests in system, decode batch, KV blocks used, queue."""

    time_s: FloatArray
    in_system: IntArray
    batch: IntArray
    used_blocks: IntArray
    waiting: IntArray


def percentiles(values: FloatArray) -> Percentiles:
    """Mean, P50, P90, P95, P99 of the values (0 for none)."""
    if values.size == 0:
        return Percentiles(mean=0.0, p50=0.0, p90=0.0, p95=0.0, p99=0.0)
    p50, p90, p95, p99 = (float(v) for v in np.percentile(values, QUANTILES))
    return Percentiles(mean=float(np.mean(values)), p50=p50, p90=p90, p95=p95, p99=p99)


def duration_s(records: Records) -> float:
    """Length of the run: from time 0 (the first arrival at the earliest) to the last completion."""
    return float(np.max(records.finish_s))


def throughput(records: Records) -> Throughput:
    """Formula: output tokens / duration, requests / duration, (input + output) / duration."""
    duration = duration_s(records)
    output = float(np.sum(records.output_tokens))
    total = output + float(np.sum(records.input_tokens))
    return Throughput(
        output_tokens_per_s=output / duration,
        requests_per_s=records.finish_s.size / duration,
        total_tokens_per_s=total / duration,
    )


def goodput_requests_per_s(records: Records, *, ttft_s: float | None, tpot_s: float | None) -> float:
    """Requests meeting every given SLO per second: count(ttft <= X and tpot <= Y) / duration; a one-token
    request has no TPOT (undefined) and never meets a TPOT target."""
    ok = np.ones(records.finish_s.size, dtype=bool)
    if ttft_s is not None:
        ok &= records.ttft_s <= ttft_s
    if tpot_s is not None:
        ok &= (records.output_tokens > 1) & (records.tpot_s <= tpot_s)
    return float(np.count_nonzero(ok)) / duration_s(records)


# Overload verdict: an open-loop queue that grows without bound leaves a backlog proportional to the run and
# TTFTs that grow with arrival time. [assumed thresholds: a stable queue at a few hundred to thousands of
# requests holds O(1 / (1 - utilisation)) requests, far below 10 % of them, and its TTFT does not double
# between the second and last quarter of arrivals]
OVERLOAD_BACKLOG_FRACTION = 0.10
OVERLOAD_TTFT_GROWTH = 2.0
MIN_OVERLOAD_REQUESTS = 8


def overload(records: Records, *, closed_loop: bool = False) -> tuple[int, bool]:
    """(backlog at the last arrival, overloaded?).

    Formula: backlog = count(finish > max(arrival)) (requests arrived and not finished when the last
    arrives); overloaded = backlog > 10 % of the requests and mean TTFT of the last quarter of arrivals >
    2 x that of the second quarter (the first quarter is the warm-up). A closed loop is never overloaded:
    its K users keep at most K requests in the system (a run of about K requests is one burst whose TTFT
    grows with queue position, not a queue growing without bound).
    """
    count = records.arrival_s.size
    if count < MIN_OVERLOAD_REQUESTS:
        return 0, False
    backlog = int(np.count_nonzero(records.finish_s > np.max(records.arrival_s)))
    if closed_loop:
        return backlog, False
    ttft = records.ttft_s[np.argsort(records.arrival_s, kind="stable")]
    quarter = count // 4
    second, last = float(np.mean(ttft[quarter : 2 * quarter])), float(np.mean(ttft[-quarter:]))
    growing = last > OVERLOAD_TTFT_GROWTH * second
    return backlog, bool(backlog > OVERLOAD_BACKLOG_FRACTION * count and growing)


def mean_in_system(
    timeline: Timeline, *, arrival_s: FloatArray | None = None, reach_delay_s: float = 0.0
) -> float:
    """Time average of the requests in system, counted from their arrival:

        (sum_i n_i * (t_{i+1} - t_i) + sum_j (t_admit_j - a_j)) / t_last

    n_i counts the requests the engine has admitted at event i; a request sent at a_j reaches the engine
    reach_delay_s later (the per-request cost outside the forward pass, StepTable.request_overhead_s) and is
    admitted at the first event t_admit_j at or after a_j + reach_delay_s, so without the second sum it
    would count from admission, not arrival (2.8-11.6 % below Little's law in 5 of 51 random runs,
    issue 26 W6; 85 % below with a 0.33 s request cost and one-token outputs). arrival_s: every request's
    send time (inf: never issued); None: no correction.
    """
    times = timeline.time_s
    if times.size < 2 or times[-1] <= 0:
        return 0.0
    area = float(np.sum(timeline.in_system[:-1] * np.diff(times)))
    if arrival_s is not None:
        arrived = arrival_s[arrival_s <= times[-1]]
        reach = arrived + reach_delay_s
        admitted = times[np.minimum(np.searchsorted(times, reach, side="left"), times.size - 1)]
        area += float(np.sum(admitted - arrived))
    return area / float(times[-1])


def downsampled(timeline: Timeline, *, points: int = MAX_TIMELINE_POINTS) -> Timeline:
    """Every k-th event of the timeline so at most `points` remain (the last one kept)."""
    stride = max(1, -(-timeline.time_s.size // points))
    keep = np.unique(np.append(np.arange(0, timeline.time_s.size, stride), timeline.time_s.size - 1))
    return Timeline(
        time_s=timeline.time_s[keep],
        in_system=timeline.in_system[keep],
        batch=timeline.batch[keep],
        used_blocks=timeline.used_blocks[keep],
        waiting=timeline.waiting[keep],
    )


class SimSummary(Frozen):
    """What `kvplan simulate --json` prints (keys kept stable: scripts depend on them)."""

    requests: int
    duration_s: float
    throughput: Throughput
    ttft_s: Percentiles
    tpot_s: Percentiles
    e2e_s: Percentiles
    mean_in_system: float
    max_batch_reached: int
    preemptions: int
    goodput_requests_per_s: float | None
    slo: dict[str, float] | None
    scheduler: SchedulerConfig
    kv_peak_fraction: float
    prefill_tokens: int
    calibrated: bool
    assumptions: tuple[str, ...]
    backlog_at_last_arrival: int = 0
    overloaded: bool = False
    tpot_requests: int | None = None  # requests with more than one output token (tpot_s's sample)
    notes: tuple[str, ...] = ()  # what a reader must know of the run (P:D: its TTFT, what is not modelled)
