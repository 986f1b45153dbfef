"""Read what MindIE logged at start-up (pure: text in, frozen figures out) and correct the plan's reserve.

Assumed log format: MindIE-LLM master Python logs (MINDIE_LLM_PYTHON_LOG_TO_FILE=1,
MINDIE_LLM_PYTHON_LOG_LEVEL=INFO), one line per message with any prefix (time, level, rank), as written by:
  router initialize()         ">>>global rank:0: return initialize success result: {... 'kvCacheDescs':
                               [{'npuBlockNum': 816, 'blockSize': 128, ...}] ...}"   (one per rank)
  llm_manager (C++)           "CpuBlockNum:0; NpuBlockNum: 816"
  Generator.__init__          "Model loading took 13.72 GiB memory."
  Generator.warm_up (-1 only) "Requested memory: 0.8 (util), 102.40 GiB" and MemoryProfilingResult:
                               "Total npu memory: 128.00 GiB; Total non KV cache memory: 19.70 GiB; ..."
  _validate_warmup_memory     "Allocated 82.7 (GiB) NPU memory for KVcache. Model role: standard"
                               or at a failed start-up "... Required block number: 257. Left block number: 9."
  _get_warm_up_params         "warmup params: max_prefill_tokens=8192, max_seq_len=32768, ..."
Older releases (MindIE-LLM @40fb063 generator.py warm-up, kvcache_settings.py watch_npu_mem; seen in the
GPUStack issue 2849 log of a 300I Duo) word the same figures, in GiB, as
  watch_npu_mem               "After Decode warmup, peak mem: 17.02G, total_mem: 43.24G" (peak = total -
                               free after warm-up, one KV block held: the non-KV memory, within one block)
  warm-up result              "`Total blocks` needs npu memory(GB): 20.5" (the KV budget, like "Allocated")
Spellings "npuBlockNum=817" and '"npuBlockNum": "817"' (older releases) are accepted too. The docs'
advice is followed: the smallest npuBlockNum over ranks is the instance's block count.
"""

from __future__ import annotations

import re

from pydantic import Field

from planner import units
from planner.deployment import Deployment
from planner.engines import common
from planner.engines.mindie.config import BlockPrediction
from planner.engines.mindie.pool import reserved_blocks
from planner.errors import PlanInputError
from planner.readers import (
    LOG_NUMBER,
    log_count,
    log_counts,
    log_fraction,
    log_gib_figures,
    smallest_over_ranks,
)
from planner.results import Plan
from planner.schema import Frozen, HardwareProfile

_N = rf"({LOG_NUMBER})"
NPU_BLOCK_RE = re.compile(r"(?<![A-Za-z_])npuBlockNum['\"]?\s*[:=]\s*['\"]?(\d+)", re.IGNORECASE)
BLOCK_SIZE_RE = re.compile(r"['\"]blockSize['\"]\s*:\s*(\d+)")
# MindieLogFigures' per-rank lists of GiB figures, each with the line it is read from (every match, in order)
GIB_FIGURE_LINES = {
    "kv_cache_bytes": re.compile(
        rf"(?:Allocated\s+(?={LOG_NUMBER}\s*\(GiB\)\s*NPU memory for KVcache)"
        rf"|`Total blocks` needs npu memory\(GB\):\s*){_N}"
    ),
    "weights_bytes": re.compile(rf"Model loading took\s+{_N}\s*GiB"),
    "non_kv_cache_bytes": re.compile(
        rf"(?:Total non KV cache memory:|After (?:prefill |Decode |check )?warmup, peak mem:)\s*{_N}\s*G"
    ),
}
TOTAL_RE = re.compile(rf"(?:Total npu memory:|warmup, peak mem:\s*{LOG_NUMBER}\s*G,\s*total_mem:)\s*{_N}\s*G")
FRACTION_RE = re.compile(rf"Requested memory:\s*{_N}\s*\(util\)")
WARMUP_RE = re.compile(
    r"warmup params: max_prefill_tokens=(\d+), max_seq_len=(\d+), max_input_len=(\d+), "
    r"max_iter_times=(\d+)"
)
WARMUP_FAILED_RE = re.compile(r"Required block number:\s*(\d+)\.\s*Left block number:\s*(\d+)")


class WarmupParams(Frozen):
    """The lengths MindIE warmed up with (they size the activation peak)."""

    max_prefill_tokens: int
    max_seq_len: int
    max_input_len: int
    max_iter_times: int


class MindieLogFigures(Frozen):
    """Every figure found; lists hold one entry per rank (or per start-up) in log order. Bytes, SI."""

    npu_block_nums: list[int] = Field(default_factory=list)
    block_size_tokens: int | None = None
    kv_cache_bytes: list[int] = Field(default_factory=list)
    weights_bytes: list[int] = Field(default_factory=list)
    total_memory_bytes: int | None = None
    non_kv_cache_bytes: list[int] = Field(default_factory=list)
    memory_fraction: float | None = None
    warmup: WarmupParams | None = None
    warmup_required_blocks: int | None = None
    warmup_left_blocks: int | None = None

    @property
    def npu_block_num(self) -> int | None:
        """The instance's block count: the smallest npuBlockNum over ranks (readers.smallest_over_ranks)."""
        return smallest_over_ranks(self.npu_block_nums)


def _warmup(groups: tuple[str, ...]) -> WarmupParams:
    return WarmupParams(**dict(zip(WarmupParams.model_fields, map(log_count, groups), strict=True)))


def parse_mindie_log(text: str) -> MindieLogFigures:
    """All figures the log holds (see the module docstring for the lines understood)."""
    total = log_gib_figures(TOTAL_RE, text)
    block_sizes = BLOCK_SIZE_RE.findall(text)
    fraction = FRACTION_RE.findall(text)
    warmup = WARMUP_RE.findall(text)
    failed = WARMUP_FAILED_RE.findall(text)
    return MindieLogFigures(
        npu_block_nums=log_counts(NPU_BLOCK_RE, text),
        block_size_tokens=log_count(block_sizes[-1]) if block_sizes else None,
        **{field: log_gib_figures(line, text) for field, line in GIB_FIGURE_LINES.items()},
        total_memory_bytes=total[-1] if total else None,
        memory_fraction=log_fraction(fraction[-1], setting="NPU_MEMORY_FRACTION") if fraction else None,
        warmup=_warmup(warmup[-1]) if warmup else None,
        warmup_required_blocks=log_count(failed[-1][0]) if failed else None,
        warmup_left_blocks=log_count(failed[-1][1]) if failed else None,
    )


class LogComparison(Frozen):
    """Predicted vs logged, and the runtime reserve that makes the next plan match what MindIE measured.

    reserve_delta_bytes > 0: MindIE used that much more memory outside the KV cache than kvplan assumed.
    """

    predicted_npu_block_num: int
    real_npu_block_num: int | None
    predicted_kv_budget_bytes: int
    real_kv_budget_bytes: int
    source: str
    reserve_delta_bytes: int
    corrected_runtime_bytes: int
    corrected_capacity_bytes: int | None
    notes: list[str]


def real_kv_budget(figures: MindieLogFigures, *, block_bytes: int, dp: int) -> tuple[int, str]:
    """The KV budget MindIE actually had per card, from the most direct figure in the log.

    Order: "Allocated X (GiB)" (exact), "Left block number" of a failed warm-up x block bytes,
    (npuBlockNum + the router's reserved blocks, 2 with dp > 1) x block bytes (a lower bound within one
    block).
    """
    if figures.kv_cache_bytes:
        return min(figures.kv_cache_bytes), "Allocated ... NPU memory for KVcache"
    if figures.warmup_left_blocks is not None:
        return figures.warmup_left_blocks * block_bytes, "Left block number (failed warm-up)"
    if figures.npu_block_num is not None:
        return (figures.npu_block_num + reserved_blocks(dp=dp)) * block_bytes, "npuBlockNum"
    raise PlanInputError(
        "--from-log: no KV figures in the log (got no npuBlockNum, 'Allocated ... for "
        "KVcache' or 'Left block number' line, expected at least one); start MindIE with "
        "MINDIE_LLM_PYTHON_LOG_TO_FILE=1 MINDIE_LLM_PYTHON_LOG_LEVEL=INFO"
    )


def reserve_delta_bytes(plan: Plan, figures: MindieLogFigures, *, real_budget: int) -> tuple[int, int | None]:
    """(extra non-KV bytes MindIE used vs the plan, the card capacity MindIE saw or None).

    With the profiling line: delta = logged non-KV memory - (weights + activation + runtime), capacity =
    logged total, so the corrected plan reproduces MindIE's budget = total x fraction - non-KV exactly.
    Otherwise: delta = plan KV budget - real budget (same card, fraction and lengths assumed).
    """
    mem = plan.memory
    if figures.non_kv_cache_bytes and figures.total_memory_bytes:
        planned_non_kv = mem.weights_bytes + mem.activation_bytes + mem.runtime_bytes
        return max(figures.non_kv_cache_bytes) - planned_non_kv, figures.total_memory_bytes
    return mem.kv_budget_bytes - real_budget, None


def _consistency_notes(plan: Plan, figures: MindieLogFigures, *, max_seq_len: int) -> list[str]:
    notes = []
    if figures.block_size_tokens and figures.block_size_tokens != plan.block_size_tokens:
        notes.append(
            f"the log's blockSize is {figures.block_size_tokens}, this plan uses {plan.block_size_tokens}"
        )
    if figures.memory_fraction is not None and figures.memory_fraction != plan.memory_fraction:
        notes.append(
            f"the log ran with NPU_MEMORY_FRACTION {figures.memory_fraction:g}, this plan with "
            f"{plan.memory_fraction:g}: the correction assumes the same fraction"
        )
    if figures.warmup and figures.warmup.max_seq_len != max_seq_len:
        notes.append(
            f"the log warmed up with max_seq_len {figures.warmup.max_seq_len}, this plan with "
            f"{max_seq_len}: activations differ, re-check after the next start"
        )
    if figures.warmup_required_blocks is not None:
        notes.append(
            f"MindIE's warm-up failed: it needed {figures.warmup_required_blocks} blocks and had "
            f"{figures.warmup_left_blocks} (start-up OOM)"
        )
    if not figures.non_kv_cache_bytes and not figures.kv_cache_bytes:
        notes.append(
            "no profiling line: assuming the logged run used npuMemSize -1; with an explicit "
            "npuMemSize the log only confirms the block size, not the reserve"
        )
    return notes


def compare_with_log(plan: Plan, *, figures: MindieLogFigures, prediction: BlockPrediction) -> LogComparison:
    """Predicted (npuMemSize -1) vs real npuBlockNum and KV budget, and the corrected reserve (>= 0)."""
    dp = plan.layout.dp if plan.layout is not None else 1
    real_budget, source = real_kv_budget(figures, block_bytes=prediction.block_bytes, dp=dp)
    delta, capacity = reserve_delta_bytes(plan, figures, real_budget=real_budget)
    corrected = max(plan.memory.runtime_bytes + delta, 0)
    notes = _consistency_notes(plan, figures, max_seq_len=plan.ctx_tokens)
    if corrected == 0:
        notes.append("MindIE had more memory than kvplan's runtime reserve can give back: reserve set to 0")
    planned_budget = max(plan.memory.kv_budget_bytes, 0)  # the -1 estimate, whatever npuMemSize is now
    predicted_blocks = max(planned_budget // prediction.block_bytes - reserved_blocks(dp=dp), 0)
    return LogComparison(
        predicted_npu_block_num=predicted_blocks,
        real_npu_block_num=figures.npu_block_num,
        predicted_kv_budget_bytes=planned_budget,
        real_kv_budget_bytes=real_budget,
        source=source,
        reserve_delta_bytes=delta,
        corrected_runtime_bytes=corrected,
        corrected_capacity_bytes=capacity,
        notes=notes,
    )


def corrected_deployment(dep: Deployment, comparison: LogComparison) -> Deployment:
    """The deployment with the card's runtime reserve (and capacity, when logged) set from the log."""
    runtime_gib = units.bytes_to_gib(comparison.corrected_runtime_bytes)
    update: dict[str, float | int | None] = {"runtime_overhead_gib": runtime_gib}
    if comparison.corrected_capacity_bytes:  # what the runtime sees: the card's visible total
        update |= common.logged_total_figures(dep.hardware, comparison.corrected_capacity_bytes)
    hardware = HardwareProfile.model_validate({**dep.hardware.model_dump(), **update})
    return dep.model_copy(update={"hardware": hardware})
