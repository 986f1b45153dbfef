"""`kvplan calibrate`: run the microbenchmarks, map medians to PerfCoefficients, write a measured profile.

Mapping (each achieved rate is divided by the card's datasheet figure):
    weight_read_bandwidth_fraction  bf16 GEMV at decode batches <= 16 over every shape (the model's and the
    matmul_latency_us               1024^2 .. 8192 x 28672 ladder): least squares of t = latency + bytes / bw
                                    on relative residuals; fraction = bw / memory_bandwidth, latency >= 0
    kv_read_bandwidth_fraction      decode attention points with KV >= attn_min_fit_bytes: bytes / (t - k),
                                    median, / memory_bandwidth (the fallback when a plan has no table)
    attention_table                 every decode attention point as (batch, kv_heads, head_dim, ctx, GB/s)
    compute_fraction[dtype]         large square GEMM FLOP/s / peak_tflop_per_s[dtype], per dtype measured
    kernel_overhead_us, _table      per-kernel time of a decode layer's small-kernel mix from a graph at
                                    each batch (calibration/small_kernels.py; _us: the smallest); older raw
                                    files: the elementwise chain, else the empty kernel (cpu: eager)
    step_overhead_us                host wall time of: replay a graph holding argmax over the vocabulary, sync
    grouped_matmul_latency_us       grouped expert GEMMs (MoE gate_up and down over all experts, every decode
    grouped_weight_read_bandwidth_fraction  batch): the same least squares over touched-expert bytes
    allreduce_latency_us            all-reduce over every visible device (graph replay when captured, else
    allreduce_bandwidth_fraction    eager): least squares of t = latency + bus_bytes / bw, bus_bytes =
                                    2 (n - 1) / n * message; fraction = bw / interconnect bandwidth. One
                                    device: kept from default_coefficients, and the notes say so
Fractions above 1 (a card faster than its datasheet) are clipped to 1 and noted.

Every benchmark runs isolated (device.Backend.run_guarded): a failure or out-of-memory error becomes one note
and the profile is written from the rows that were measured. Timings taken eager because graph capture was
unavailable or refused carry timing="eager" and the profile's notes and versions["graph_mode"] say so. On npu
the decode-attention sizes are capped by device memory, the decode-chain divisor is counted with
torch_npu.profiler, and a SoC without bf16 (310P) labels its "bf16" rows fp16 (calibration/npu_caps.py).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from calibration import device as devmod
from calibration import shapes as shapes_mod
from calibration import small_kernels
from calibration.bounds import screened
from calibration.microbench import Measurements, Progress, Suite
from calibration.npu_post import finish_npu, sized_for_memory
from calibration.profile_writer import samples_from
from calibration.shapes import FULL, STANDARD_SHAPES, TINY, TINY_SHAPES, ModelShapes, shapes_from_card
from planner import catalog, units
from planner.errors import KvplanError
from planner.schema import (
    MIN_FRACTION,
    MIN_GB_PER_S,
    AttentionRate,
    HardwareProfile,
    KernelCost,
    MeasuredBlock,
    PerfCoefficients,
)

TOOL = "kvplan calibrate"
TOOL_VERSION = "0.1.0"
DECODE_GEMV_MAX_BATCH = 16
DEFAULT_BUDGET_S = 60.0


@dataclass(frozen=True)
class CalibrationResult:
    """The measured block, the raw rows behind it, and where the profile came from."""

    measured: MeasuredBlock
    measurements: Measurements
    source: Path


def _rows(meas: Measurements, bench: str, **match: Any) -> list[dict[str, Any]]:
    return [r for r in meas.rows.get(bench, []) if all(r.get(k) == v for k, v in match.items())]


def _graphed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows timed from a graph replay (raw files from before the timing label were graph on devices)."""
    return [r for r in rows if r.get("timing", "graph") == "graph"]


def kernel_overhead_s(meas: Measurements) -> float:
    """Per-kernel fixed cost: small_kernel_rows at the smallest batch (graph replays first, eager when
    nothing was captured), else the empty kernel (graph replay when measured, else eager)."""
    chain = small_kernels.per_batch_rows(meas.rows)
    rows = (
        _graphed(chain)
        or chain
        or _rows(meas, "kernels", mode="graph")
        or _rows(meas, "kernels", mode="eager")
    )
    return float(rows[0]["median_s"]) if rows else 0.0


def kernel_overhead_table(meas: Measurements) -> list[KernelCost] | None:
    """Per-kernel time of the decode layer's kernel mix (else the elementwise chain) at each batch."""
    us = units.US_S
    rows = small_kernels.per_batch_rows(meas.rows)
    return [
        KernelCost(tokens=r["batch"], kernel_us=r["median_s"] / us, hidden_size=r.get("hidden")) for r in rows
    ] or None


def decode_dtype(meas: Measurements) -> str:
    """The dtype of the dense decode benchmarks: bf16, or fp16 where the SoC has no bf16 (310P)."""
    return "fp16" if _rows(meas, "gemv", dtype="fp16") and not _rows(meas, "gemv", dtype="bf16") else "bf16"


def gemv_latency_fit(meas: Measurements) -> tuple[float, float] | None:
    """(latency_s, bytes_per_s) of t = latency + bytes / bw, bf16 (310P: fp16) GEMV rows at batch <= 16."""
    rows = [r for r in _rows(meas, "gemv", dtype=decode_dtype(meas)) if r["batch"] <= DECODE_GEMV_MAX_BATCH]
    return latency_bandwidth_fit(rows, bytes_key="bytes")


def grouped_gemm_fit(meas: Measurements) -> tuple[float, float] | None:
    """(latency_s, bytes_per_s) of t = latency + bytes / bw over every grouped expert GEMM row (bytes =
    touched experts' matrices + routed activations; calibration/moe_bench.py)."""
    return latency_bandwidth_fit(_rows(meas, "grouped_gemm"), bytes_key="bytes")


def allreduce_fit(meas: Measurements) -> tuple[float, float] | None:
    """(latency_s, bus bytes_per_s) of t = latency + bus_bytes / bw over all-reduce rows: graph replays
    when any were captured (a graphed decode step's all-reduces), else eager calls."""
    rows = _rows(meas, "allreduce", mode="graph") or _rows(meas, "allreduce", mode="eager")
    return latency_bandwidth_fit(rows, bytes_key="bus_bytes")


def latency_bandwidth_fit(rows: list[dict[str, Any]], *, bytes_key: str) -> tuple[float, float] | None:
    """(latency_s, bytes_per_s) of t = latency + bytes / bw, least squares on relative residuals.

    Formula: minimise sum_i ((L + b_i / B - t_i) / t_i)^2, linear in (L, 1 / B); needs two sizes.
    Latency is clipped at 0; None when fewer than two distinct sizes were measured or 1 / B <= 0.
    """
    if len({r[bytes_key] for r in rows}) < 2:
        return None
    t = np.array([r["median_s"] for r in rows])
    design = np.column_stack([np.ones_like(t), [r[bytes_key] for r in rows]]) / t[:, None]
    (latency, inverse_bw), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if inverse_bw <= 0:
        return None
    return max(float(latency), 0.0), 1.0 / float(inverse_bw)


def attention_table(meas: Measurements) -> list[AttentionRate] | None:
    """Every decode attention point as a measured rate (GB/s of KV read, fixed costs included)."""
    rows = _rows(meas, "attention")
    rates = [(r, r["bytes"] / r["median_s"] / units.GB_BYTES) for r in rows]
    stalled = [r for r, rate in rates if rate < MIN_GB_PER_S]
    if stalled:  # a point below the profile's floor is a stalled timing, not a rate: leave it out, say so
        meas.notes.append(
            f"attention: {len(stalled)} point(s) below {MIN_GB_PER_S:g} GB/s left out of the table"
        )
    return [
        AttentionRate(
            batch=r["batch"],
            kv_heads=r["kv_heads"],
            head_dim=r["head_dim"],
            ctx_tokens=r["ctx"],
            gb_per_s=rate,
        )
        for r, rate in rates
        if rate >= MIN_GB_PER_S
    ] or None


def _busy_s(seconds: float, overhead_s: float) -> float:
    """Time a kernel spends moving bytes: t - overhead, never below half of t (guards noisy tiny kernels)."""
    return max(seconds - overhead_s, seconds / 2)


def weight_read_bytes_per_s(meas: Measurements, overhead_s: float) -> float | None:
    """Achieved bytes/s of bf16 decode GEMV (batch <= 16), aggregated over shapes, median over batches."""
    per_batch: dict[int, list[tuple[float, float]]] = {}
    for row in _rows(meas, "gemv", dtype=decode_dtype(meas)):
        if row["batch"] <= DECODE_GEMV_MAX_BATCH:
            per_batch.setdefault(row["batch"], []).append(
                (row["bytes"], _busy_s(row["median_s"], overhead_s))
            )
    rates = [sum(b for b, _ in pts) / sum(t for _, t in pts) for pts in per_batch.values()]
    return statistics.median(rates) if rates else None


def kv_read_bytes_per_s(meas: Measurements, overhead_s: float, *, min_bytes: int) -> float | None:
    """Median achieved bytes/s of decode attention over points whose KV is at least min_bytes."""
    rows = _rows(meas, "attention")
    big = [r for r in rows if r["bytes"] >= min_bytes] or rows
    rates = [r["bytes"] / _busy_s(r["median_s"], overhead_s) for r in big]
    return statistics.median(rates) if rates else None


def stream_bytes_per_s(meas: Measurements) -> float | None:
    """Best of streaming read and copy (bytes read + written) bandwidth."""
    rates = [r["bytes"] / r["median_s"] for r in _rows(meas, "stream")]
    return max(rates) if rates else None


def _fraction(achieved: float, datasheet: float, label: str, notes: list[str]) -> float:
    """achieved / datasheet, kept inside the profile's field bounds [MIN_FRACTION, 1].

    A timing noisier than the kernel overhead it is corrected by can give a fraction at or below zero; it
    is kept at MIN_FRACTION so that the plausibility screen (calibration/bounds.py `implausible`) names the
    microbenchmark and keeps the card's default, instead of the profile model refusing the run with a
    validation error.
    """
    value = achieved / datasheet
    if not math.isfinite(value) or value < MIN_FRACTION:
        notes.append(f"{label}: measured {value:.3g} of datasheet, not a physical fraction")
        return MIN_FRACTION
    if value > 1:
        notes.append(f"{label}: measured {value:.3f} of datasheet, clipped to 1")
        return 1.0
    return value


def compute_fractions(meas: Measurements, hw: HardwareProfile, notes: list[str]) -> dict[str, float]:
    """compute_fraction per dtype: measured GEMM FLOP/s / the card's dense peak FLOP/s, for every dtype the
    card has a peak for; the card's default fraction for the rest. Out-of-range fractions go to `notes`."""
    compute = dict(hw.default_coefficients.compute_fraction)
    for row in _rows(meas, "gemm"):
        if row["dtype"] in hw.peak_tflop_per_s:
            compute[row["dtype"]] = _fraction(
                row["flop"] / row["median_s"],
                hw.peak_flop_per_s(row["dtype"]),
                f"compute_fraction.{row['dtype']}",
                notes,
            )
    return compute


def coefficients_from(meas: Measurements, hw: HardwareProfile, *, min_attn_bytes: int) -> PerfCoefficients:
    """PerfCoefficients from measurements; anything not measured keeps the card's default coefficient."""
    base, notes = hw.default_coefficients, meas.notes
    overhead = kernel_overhead_s(meas)
    bw = hw.memory_bandwidth_bytes_per_s
    gemv_fit = gemv_latency_fit(meas)
    latency_s, weight = gemv_fit if gemv_fit else (None, weight_read_bytes_per_s(meas, overhead))
    kv = kv_read_bytes_per_s(meas, overhead, min_bytes=min_attn_bytes)
    compute = compute_fractions(meas, hw, notes)
    steps = _rows(meas, "step")
    grouped = grouped_gemm_fit(meas)
    if grouped is None and _rows(meas, "grouped_gemm"):
        notes.append("grouped_matmul_*: not fitted (time not growing with bytes); dense terms kept")
    link = allreduce_fit(meas)
    if link is None:
        notes.append("allreduce_*: default coefficients kept (all-reduce not measured)")
    return PerfCoefficients(
        weight_read_bandwidth_fraction=_fraction(weight, bw, "weight_read", notes)
        if weight
        else base.weight_read_bandwidth_fraction,
        kv_read_bandwidth_fraction=_fraction(kv, bw, "kv_read", notes)
        if kv
        else base.kv_read_bandwidth_fraction,
        compute_fraction=compute,
        kernel_overhead_us=overhead / units.US_S if overhead else base.kernel_overhead_us,
        matmul_latency_us=latency_s / units.US_S if latency_s is not None else base.matmul_latency_us,
        step_overhead_us=steps[0]["median_s"] / units.US_S if steps else base.step_overhead_us,
        allreduce_latency_us=link[0] / units.US_S if link else base.allreduce_latency_us,
        allreduce_bandwidth_fraction=_fraction(
            link[1], units.gb_per_s_to_bytes_per_s(hw.interconnect.bandwidth_gb_per_s), "allreduce", notes
        )
        if link
        else base.allreduce_bandwidth_fraction,
        kernel_overhead_table=kernel_overhead_table(meas),
        attention_table=attention_table(meas),
        grouped_matmul_latency_us=grouped[0] / units.US_S if grouped else None,
        grouped_weight_read_bandwidth_fraction=_fraction(grouped[1], bw, "grouped_weight_read", notes)
        if grouped
        else None,
    )


def pick_shapes(model: str | None, *, tiny: bool) -> ModelShapes:
    """Shapes of --model, else the standard set (TINY_SHAPES for cpu dry runs)."""
    if model is not None:
        card, _ = catalog.resolve_model(model)
        return shapes_from_card(card)
    return TINY_SHAPES if tiny else STANDARD_SHAPES


def run_calibration(
    card: str,
    *,
    device: str,
    model: str | None = None,
    tiny: bool | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    progress: Progress | None = None,
) -> CalibrationResult:
    """Benchmark `device` and return the measured block for `card` (tiny sizes default on for cpu).

    Raises KvplanError (one line) when no benchmark produced a row; otherwise the block holds what ran and
    its notes say what did not.
    """
    hw = catalog.resolve_card(card)
    backend = devmod.open_backend(device)
    tiny = shapes_mod.tiny_sizes(backend.kind) if tiny is None else tiny
    sizes = sized_for_memory(TINY if tiny else FULL, backend)
    suite = Suite(
        backend=backend,
        sizes=sizes,
        shapes=pick_shapes(model, tiny=tiny),
        budget_s=budget_s,
        progress=progress or (lambda _label: None),
    )
    meas = suite.run()
    if not any(meas.rows.values()):
        raise KvplanError(
            f"--device {backend.spec.text}: no benchmark produced a result, no profile written; "
            f"{'; '.join(dict.fromkeys(meas.notes + backend.notes))[:600]}"
        )
    finish_npu(meas, backend, hidden=sizes.small_kernel_hidden)
    meas.notes.extend(n for n in backend.notes if n not in meas.notes)
    coefficients = coefficients_from(meas, hw, min_attn_bytes=sizes.attn_min_fit_bytes)
    if backend.kind != "cpu":  # a CPU dry run is divided by the card's datasheet: always far below it
        coefficients = screened(coefficients, hw.default_coefficients, meas.notes)
    return CalibrationResult(
        measured=measured_block(meas, backend, coefficients, shapes=suite.shapes.name, tiny=tiny),
        measurements=meas,
        source=source_path(card),
    )


def measured_block(
    meas: Measurements, backend: devmod.Backend, coefficients: PerfCoefficients, *, shapes: str, tiny: bool
) -> MeasuredBlock:
    """The profile's measured block: coefficients plus provenance (versions, settings, graph mode)."""
    mem = backend.mem_get_info()
    bandwidth = stream_bytes_per_s(meas)
    return MeasuredBlock(
        tool=TOOL,
        tool_version=TOOL_VERSION,
        date=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        device_name=backend.device_name(),
        backend=backend.kind,
        versions=backend.provenance(),
        coefficients=coefficients,
        memory_bandwidth_gb_per_s=bandwidth / units.GB_BYTES if bandwidth else None,
        usable_memory_gib=units.bytes_to_gib(mem[1]) if mem else None,
        samples=samples_from(meas),
        notes="; ".join(
            [
                f"shapes: {shapes}",
                f"sizes: {'tiny' if tiny else 'full'}",
                f"took {meas.elapsed_s:.1f} s",
                *meas.notes,
            ]
        ),
    )


def source_path(card: str) -> Path:
    """The YAML file a card id or path refers to."""
    path = Path(card)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return path
    return catalog.data_dir("hwprofiles") / f"{catalog.resolve_card(card).id}.yaml"


def main() -> None:
    """`python -m calibration.calibrate CARD DEVICE OUT [MODEL] [RAW]`: device-side entry, no typer needed."""
    import sys

    from calibration.profile_writer import write_profile
    from calibration.raw import rebuild_from_raw, write_raw

    if sys.argv[1] == "--from-raw":  # python -m calibration.calibrate --from-raw RAW CARD OUT
        raw, card, out = Path(sys.argv[2]), sys.argv[3], sys.argv[4]
        write_profile(source_path(card), rebuild_from_raw(card, raw), out=Path(out), force=True)
        return
    card, device, out = sys.argv[1:4]
    model = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] != "-" else None
    result = run_calibration(
        card, device=device, model=model, progress=lambda s: print(f"[calibrate] {s}", flush=True)
    )
    write_profile(result.source, result.measured, out=Path(out), force=True)
    if len(sys.argv) > 5:
        write_raw(result, Path(sys.argv[5]))
    print(json.dumps(result.measured.coefficients.model_dump(), indent=1))
    print(f"[calibrate] took {result.measurements.elapsed_s:.1f} s; notes: {result.measured.notes}")


if __name__ == "__main__":
    main()
