"""Read what vLLM / vllm-ascend logged at start-up (pure: text in, frozen figures out).

Lines understood (any prefix: time, level, process, rank), with the release that writes each:
  vllm-ascend >= v0.16, vLLM V1   "Available KV cache memory: 12.57 GiB" (310P adds "(halved for workspace)";
                                  a line from worker_310p.py marks the 310P rule too)
  vllm-ascend v0.11 .. v0.15      "Available memory: 11381826560, total memory: 65452113920" (bytes)
  vLLM V1                         "GPU KV cache size: 236,416 tokens"
                                  "Maximum concurrency for 32,768 tokens per request: 7.21x"
  vLLM V1 / vllm-ascend           "Model loading took 11.55 GiB memory ..." /
                                  "Loading model weights took 18.6823 GB"
  vllm-ascend >= 0.18 ([VA] worker.py:773-790)
      "Free memory on device (42.24/43.24 GiB) on startup. Desired GPU memory utilization is (0.8, 34.59 GiB).
       Actual usage: 18.8 GiB for weights, 1.71 GiB for peak activation, 1.05 GiB for non-torch memory,
       0.0 GiB for NPU graph memory. ... Current KV cache memory: 5.77 GiB."
  vLLM V0 "Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB
       peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB
       kv_cache_size=3.81GiB gpu_memory_utilization=0.90", "# GPU blocks: 1952", "Maximum concurrency for
       20000 tokens per request: 1.56x"
GiB figures are rounded to 0.01 GiB by the engine: a byte count from them is within 5 MiB.
Per-rank lines may repeat; lists keep log order, and the instance's pool is the smallest rank's.
"""

from __future__ import annotations

import re

from pydantic import Field

from planner import units
from planner.engines.vllm.startup import StartupMemory
from planner.errors import PlanInputError
from planner.readers import (
    LOG_NUMBER,
    log_count,
    log_counts,
    log_fraction,
    log_gib_bytes,
    log_gib_figures,
    smallest_over_ranks,
)
from planner.schema import BUILT_ON_FIRST_USE, Frozen

_N = rf"({LOG_NUMBER})"
_INT = r"(\d[\d,]*)"
AVAILABLE_KV_RE = re.compile(rf"Available KV cache memory:\s*{_N}\s*GiB(\s*\(halved for workspace\))?")
AVAILABLE_BYTES_RE = re.compile(r"Available memory:\s*(\d+),\s*total memory:\s*(\d+)")
KV_TOKENS_RE = re.compile(rf"GPU KV cache size:\s*{_INT}\s*tokens")
CONCURRENCY_RE = re.compile(rf"Maximum concurrency for\s*{_INT}\s*tokens per request:\s*{_N}x")
WEIGHTS_RE = re.compile(rf"(?:Model loading took|Loading model weights took)\s*{_N}\s*(GiB|GB)")


def _field(name: str) -> str:
    """A number captured under a StartupBreakdown field's name."""
    return rf"(?P<{name}>{LOG_NUMBER})"


STARTUP_RE = re.compile(  # the groups are StartupBreakdown's fields
    rf"Free memory on device \({_field('free_at_start_bytes')}/{_field('device_total_bytes')} GiB\) on "
    rf"startup\. Desired GPU memory utilization is \({_field('gpu_memory_utilization')}, "
    rf"{_field('requested_bytes')} GiB\)\. Actual usage: {_field('weights_bytes')} GiB for weights, "
    rf"{_field('activation_bytes')} GiB for peak activation, {_field('non_torch_bytes')} GiB for non-torch "
    rf"memory, {_field('graph_bytes')} GiB for NPU graph memory"
)
CURRENT_KV_RE = re.compile(rf"Current KV cache memory:\s*{_N}\s*GiB")
# One key=value of the V0 line, from a word's start (each word is read once: linear in the line).
V0_FIELD_RE = re.compile(rf"(?<!\w)(\w+)=({LOG_NUMBER})(GiB)?(?![\w.])")
V0_FIELDS = ("total_gpu_memory", "peak_torch_memory", "non_torch_memory", "kv_cache_size")  # GiB
# no leading `\s*`: from every blank of a long run it rescanned the run (100 KB of blanks: 41 s)
BLOCKS_RE = re.compile(r"(?:GPU|NPU) blocks:\s*(\d+)")


def v0_profiles(text: str) -> list[tuple[str, ...]]:
    """Each V0 "Memory profiling results" line's (total, peak torch, non-torch, KV cache) GiB figures and
    gpu_memory_utilization, as logged. Its key=value pairs are read in one pass; a pattern spanning the
    line (`total_gpu_memory=...GiB.*?peak_torch_memory=...`) backtracked cubically on a line of repeated
    keys (900 KB kept `calibrate --from-log` busy past 30 s)."""
    found = []
    for line in text.splitlines():
        if "total_gpu_memory=" not in line:
            continue
        pairs = {key: (value, unit) for key, value, unit in V0_FIELD_RE.findall(line)}
        wanted = [(pairs.get(key), "GiB") for key in V0_FIELDS] + [(pairs.get("gpu_memory_utilization"), "")]
        if all(pair is not None and pair[1] == unit for pair, unit in wanted):
            found.append(tuple(pair[0] for pair, _unit in wanted if pair is not None))
    return found


class StartupBreakdown(StartupMemory):
    """vllm-ascend >= 0.18's "Free memory on device ... Actual usage" line (bytes, from 0.01 GiB figures)."""

    model_config = BUILT_ON_FIRST_USE

    free_at_start_bytes: int
    current_kv_bytes: int | None = None


class VllmLogFigures(Frozen):
    """Every figure found, in log order (one entry per rank or per start-up). Bytes."""

    model_config = BUILT_ON_FIRST_USE

    available_kv_bytes: list[int] = Field(default_factory=list)
    halved_for_workspace: bool = False
    device_total_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    kv_tokens: list[int] = Field(default_factory=list)
    concurrency: list[float] = Field(default_factory=list)
    max_model_len: int | None = None
    weights_bytes: list[int] = Field(default_factory=list)
    num_blocks: list[int] = Field(default_factory=list)
    breakdown: list[StartupBreakdown] = Field(default_factory=list)
    v0_activation_bytes: int | None = None
    v0_non_torch_bytes: int | None = None

    @property
    def available_kv(self) -> int | None:
        """The instance's KV memory: the smallest rank's (readers.smallest_over_ranks)."""
        return smallest_over_ranks(self.available_kv_bytes)

    @property
    def found_anything(self) -> bool:
        """True when at least one vLLM start-up line was understood."""
        return bool(self.available_kv_bytes or self.kv_tokens or self.concurrency or self.breakdown)


def _breakdown(found: re.Match[str], current: str | None) -> StartupBreakdown:
    """One STARTUP_RE line's figures (GiB, the utilisation a fraction) and the KV memory it ends with."""
    gib = {name: text for name, text in found.groupdict().items() if name != "gpu_memory_utilization"}
    return StartupBreakdown(
        **{name: log_gib_bytes(text) for name, text in gib.items()},
        gpu_memory_utilization=log_fraction(
            found["gpu_memory_utilization"], setting="gpu_memory_utilization"
        ),
        current_kv_bytes=log_gib_bytes(current) if current is not None else None,
    )


def _breakdowns(text: str) -> list[StartupBreakdown]:
    """Every STARTUP_RE line of the log, in order, with the KV memory its line ends with (CURRENT_KV_RE)."""
    breakdown = []
    for line in text.splitlines():
        found = STARTUP_RE.search(line)
        if found:
            current = CURRENT_KV_RE.search(line)
            breakdown.append(_breakdown(found, current.group(1) if current else None))
    return breakdown


def parse_vllm_log(text: str) -> VllmLogFigures:
    """All figures the log holds (see the module docstring for the lines understood)."""
    available = log_gib_figures(AVAILABLE_KV_RE, text)
    halved = any(m.group(2) for m in AVAILABLE_KV_RE.finditer(text)) or "worker_310p" in text
    totals: list[int] = []
    for used, total in AVAILABLE_BYTES_RE.findall(text):
        available.append(log_count(used))
        totals.append(log_count(total))
    breakdown = _breakdowns(text)
    for item in breakdown:
        totals.append(item.device_total_bytes)
        if item.current_kv_bytes is not None and not available:
            available.append(item.current_kv_bytes)
    util = breakdown[0].gpu_memory_utilization if breakdown else None
    v0 = v0_profiles(text)
    v0_activation = v0_non_torch = None
    weights = log_gib_figures(WEIGHTS_RE, text)
    if v0:
        total, peak, non_torch, kv, v0_util = v0[-1]
        totals.append(log_gib_bytes(total))
        available.append(log_gib_bytes(kv))
        util = log_fraction(v0_util, setting="gpu_memory_utilization")
        v0_non_torch = log_gib_bytes(non_torch)
        if weights:
            v0_activation = max(log_gib_bytes(peak) - weights[-1], 0)
    concurrency = CONCURRENCY_RE.findall(text)
    return VllmLogFigures(
        available_kv_bytes=available,
        halved_for_workspace=halved,
        device_total_bytes=min(totals) if totals else None,
        gpu_memory_utilization=util,
        kv_tokens=log_counts(KV_TOKENS_RE, text),
        concurrency=[float(x) for _length, x in concurrency],
        max_model_len=log_count(concurrency[-1][0]) if concurrency else None,
        weights_bytes=weights,
        num_blocks=log_counts(BLOCKS_RE, text),
        breakdown=breakdown,
        v0_activation_bytes=v0_activation,
        v0_non_torch_bytes=v0_non_torch,
    )


MIN_DEVICE_TOTAL_BYTES = units.MIB_BYTES  # the smallest memory_capacity_gib a profile takes (schema_hardware)
# three logged GiB figures (weights, KV, total), each rounded to 0.01 GiB (within 5 MiB), and a byte's slack
LOG_ROUNDING_BYTES = 3 * 5 * units.MIB_BYTES + units.MIB_BYTES


class LearnedMachine(Frozen):
    """What one start-up log says about the machine (bytes per rank), for `kvplan calibrate --from-log`."""

    model_config = BUILT_ON_FIRST_USE

    device_total_bytes: int
    gpu_memory_utilization: float
    weights_bytes: int | None
    activation_bytes: int | None
    non_torch_bytes: int
    cleared_bytes: int
    available_kv_bytes: int
    halved: bool
    source: str

    @property
    def runtime_bytes(self) -> int:
        """kvplan's runtime reserve that reproduces the log: non-torch + memory not this instance's, and on a
        310P the half of the remainder the engine keeps for workspace (kvplan's budget does not halve; this
        half is exact for the logged model and settings only)."""
        return self.non_torch_bytes + self.cleared_bytes + (self.available_kv_bytes if self.halved else 0)


def learn_machine(
    figures: VllmLogFigures, *, card_capacity_bytes: int, gpu_memory_utilization: float | None = None
) -> LearnedMachine:
    """The machine's device total, activation and non-torch overheads from the log's own lines.

    Refused (PlanInputError, one line) when the log holds no KV figure or no device total, or implies
    more KV memory, or a larger device, than the card holds (a log of another card); when its figures
    contradict each other (a total under 1 MiB or below the KV; without an Actual usage or V0 line,
    weights + KV x (2 on a 310P) > total x utilisation beyond LOG_ROUNDING_BYTES); and when
    --gpu-memory-utilization differs from the log's own.
    Order of evidence: vllm-ascend's "Actual usage" line (each term logged), vLLM V0's "Memory profiling
    results" line, else available KV + "Model loading took" + --gpu-memory-utilization (activation and
    non-torch then come as one figure, non_torch_bytes).
    """
    available, total = checked_kv_and_total(figures, card_capacity_bytes=card_capacity_bytes)
    logged, given = figures.gpu_memory_utilization, gpu_memory_utilization
    if logged is not None and given is not None and given != logged:
        raise PlanInputError(
            f"--gpu-memory-utilization: the log states the engine's own {logged:g} (got {given:g}, expected "
            f"{logged:g} or no flag; the flag is only for a log that does not say it)"
        )
    if figures.breakdown:
        return from_actual_usage(figures, available_kv_bytes=available)
    util = figures.gpu_memory_utilization or gpu_memory_utilization
    if util is None:
        raise PlanInputError(
            "--gpu-memory-utilization: required with this log (got no utilisation line in it, expected the "
            "value the engine ran with)"
        )
    if figures.v0_non_torch_bytes is not None and figures.v0_activation_bytes is not None:
        return LearnedMachine(
            device_total_bytes=total,
            gpu_memory_utilization=util,
            weights_bytes=figures.weights_bytes[-1] if figures.weights_bytes else None,
            activation_bytes=figures.v0_activation_bytes,
            non_torch_bytes=figures.v0_non_torch_bytes,
            cleared_bytes=0,
            available_kv_bytes=available,
            halved=False,
            source="vLLM V0 'Memory profiling results' line",
        )
    return from_kv_and_weights(figures, available_kv_bytes=available, device_total_bytes=total, util=util)


def checked_kv_and_total(figures: VllmLogFigures, *, card_capacity_bytes: int) -> tuple[int, int]:
    """(available KV, device total) of the log, refused when either is missing or exceeds the card."""
    available, total = figures.available_kv, figures.device_total_bytes
    if available is None:
        raise PlanInputError(
            "--from-log: no vLLM KV line in the log (got none of 'Available KV cache memory', 'Available "
            "memory: N, total memory: T', 'Current KV cache memory', expected one)"
        )
    if available > card_capacity_bytes:
        raise PlanInputError(
            f"--from-log: the log's KV cache ({units.fmt_gib(available)}) is more than the card holds "
            f"({units.fmt_gib(card_capacity_bytes)}): not a log of this card (check --card)"
        )
    if total is None:
        raise PlanInputError(
            "--from-log: no device total in the log (got no 'total memory', 'Free memory on device' or "
            "'total_gpu_memory' figure, expected one)"
        )
    if total < MIN_DEVICE_TOTAL_BYTES or available > total:
        raise PlanInputError(
            f"--from-log: the log's device total cannot hold its own KV cache (got a total of "
            f"{units.fmt_bytes(total)} and {units.fmt_bytes(available)} of KV, expected a total of at least "
            f"{units.fmt_bytes(MIN_DEVICE_TOTAL_BYTES)} and the KV): figures that contradict each other"
        )
    if total > card_capacity_bytes * 1.05:
        raise PlanInputError(
            f"--from-log: the log's device has {units.fmt_gib(total)}, more than the card's "
            f"{units.fmt_gib(card_capacity_bytes)}: not a log of this card (check --card)"
        )
    return available, total


def from_actual_usage(figures: VllmLogFigures, *, available_kv_bytes: int) -> LearnedMachine:
    """Every term from vllm-ascend's "Free memory on device ... Actual usage" line (the rank with the least
    KV when several logged it); what the terms leave beside the KV is memory not this instance's."""
    factor = 2 if figures.halved_for_workspace else 1
    b = min(figures.breakdown, key=lambda item: item.current_kv_bytes or 0)
    kv = b.current_kv_bytes if b.current_kv_bytes is not None else available_kv_bytes
    left = b.requested_bytes - b.weights_bytes - b.activation_bytes - b.non_torch_bytes - kv * factor
    return LearnedMachine(
        device_total_bytes=b.device_total_bytes,
        gpu_memory_utilization=b.gpu_memory_utilization,
        weights_bytes=b.weights_bytes,
        activation_bytes=b.activation_bytes,
        non_torch_bytes=b.non_torch_bytes,
        cleared_bytes=max(left, 0),
        available_kv_bytes=kv,
        halved=bool(factor == 2),
        source="vllm-ascend 'Free memory on device ... Actual usage' line",
    )


def from_kv_and_weights(
    figures: VllmLogFigures, *, available_kv_bytes: int, device_total_bytes: int, util: float
) -> LearnedMachine:
    """Available KV, "Model loading took" and the utilisation: non-torch = total x util - weights - KV
    (x 2 where the 310P halves), activation folded into it; refused without a weights line."""
    if not figures.weights_bytes:
        raise PlanInputError(
            "--from-log: no weights line in the log (got no 'Model loading took' / 'Loading model weights "
            "took', expected one to split the non-KV memory)"
        )
    factor = 2 if figures.halved_for_workspace else 1
    weights = figures.weights_bytes[-1]
    budget = int(device_total_bytes * util)
    if weights + available_kv_bytes * factor > budget + LOG_ROUNDING_BYTES:
        raise PlanInputError(
            f"--from-log: the log's weights {units.fmt_gib(weights)} and KV cache "
            f"{units.fmt_gib(available_kv_bytes * factor)} are more than its device total x utilisation "
            f"({units.fmt_gib(device_total_bytes)} x {util:g} = {units.fmt_gib(budget)}; expected at most "
            "that, within the log's rounding): check --gpu-memory-utilization against the engine's value"
        )
    return LearnedMachine(
        device_total_bytes=device_total_bytes,
        gpu_memory_utilization=util,
        weights_bytes=weights,
        activation_bytes=None,
        non_torch_bytes=max(int(device_total_bytes * util) - weights - available_kv_bytes * factor, 0),
        cleared_bytes=0,
        available_kv_bytes=available_kv_bytes,
        halved=bool(factor == 2),
        source="available KV, weights and utilisation (activation and non-torch as one figure)",
    )


def learned_lines(machine: LearnedMachine) -> list[str]:
    """The learned terms as printed lines."""
    gib = units.fmt_gib
    lines = [
        f"from the log ({machine.source}):",
        f"  device total {gib(machine.device_total_bytes)} x {machine.gpu_memory_utilization:g} = "
        f"{gib(int(machine.device_total_bytes * machine.gpu_memory_utilization))}",
    ]
    if machine.weights_bytes is not None:
        lines.append(f"  weights {gib(machine.weights_bytes)}")
    if machine.activation_bytes is not None:
        lines.append(f"  activation peak {gib(machine.activation_bytes)}")
    label = "non-torch" if machine.activation_bytes is not None else "activation + non-torch"
    lines.append(f"  {label} {gib(machine.non_torch_bytes)}")
    if machine.cleared_bytes:
        lines.append(f"  device memory not this instance's {gib(machine.cleared_bytes)}")
    lines.append(
        f"  available KV {gib(machine.available_kv_bytes)}" + (" (halved, 310P)" if machine.halved else "")
    )
    return lines
