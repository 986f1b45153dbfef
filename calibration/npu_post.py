"""Device-side finishing of a calibration run (calibration/calibrate.py calls these around the suite).

    sized_for_memory   caps the decode-attention grid by free device memory (a 32 GB 910B4 cannot hold the
                       FULL grid's 20 GiB points next to everything else)
    finish_npu         says when graph timings fell back to eager; counts the decode-layer mix's device
                       kernels with the device profiler after every timing (cuda and npu: the divisor of
                       kernel_overhead_us); on npu also the decode chain's, and relabels the "bf16" rows of
                       a SoC without bf16 (310P) as fp16

The npu parts have run only against tests/fake_npu, never on an Ascend device.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from calibration import device as devmod
from calibration import small_kernels
from calibration.microbench import CHAIN_KERNELS_PER_PASS, Measurements, decode_chain
from calibration.shapes import BenchSizes
from planner import units

# Decode-attention points may use at most this share of the free device memory (K and V of one layer).
ATTN_MEMORY_FRACTION = 0.5  # [assumed: headroom for the query, outputs, workspace and other buffers]


def _rows(meas: Measurements, bench: str, **match: Any) -> list[dict[str, Any]]:
    return [r for r in meas.rows.get(bench, []) if all(r.get(k) == v for k, v in match.items())]


def sized_for_memory(sizes: BenchSizes, backend: devmod.Backend) -> BenchSizes:
    """sizes with attn_max_bytes capped at ATTN_MEMORY_FRACTION of the free device memory (cpu: as is)."""
    mem = backend.mem_get_info()
    if mem is None:
        return sizes
    cap = int(mem[0] * ATTN_MEMORY_FRACTION)
    if cap >= sizes.attn_max_bytes:
        return sizes
    backend.notes.append(
        f"decode attention: points above {units.bytes_to_gib(cap):.1f} GiB of KV skipped "
        f"({ATTN_MEMORY_FRACTION:g} of {units.bytes_to_gib(mem[0]):.1f} GiB free)"
    )
    return dataclasses.replace(sizes, attn_max_bytes=cap)


def finish_npu(meas: Measurements, backend: devmod.Backend, *, hidden: int) -> None:
    """npu only: count the decode chain's device kernels (rescaling its per-kernel rows), relabel the
    "bf16" rows of a SoC without bf16, and say when graph timings fell back to eager."""
    if backend.kind == "cpu":
        return
    if backend.graph_state != "captured":
        meas.notes.append(
            f"graph mode: none captured ({backend.graph_state}); kernel_overhead_us and the other graph "
            "benchmarks are eager timings (host launch cost included)"
        )
    backend.run_guarded("layer mix kernels", lambda: _recount_mix(meas, backend), meas.notes)
    if backend.kind != "npu":
        return
    backend.run_guarded(
        "kernels per pass", lambda: _count_chain_kernels(meas, backend, hidden=hidden), meas.notes
    )
    if backend.compute_dtype == backend.torch.float16:
        for rows in meas.rows.values():
            for row in rows:
                if row.get("dtype") == "bf16":
                    row["dtype"] = "fp16"
        meas.notes.append(f"{backend.caps.soc}: no bf16; the bf16 benchmarks ran in fp16 and say so")  # type: ignore[union-attr]


def _recount_mix(meas: Measurements, backend: devmod.Backend) -> None:
    """The decode-layer mix's divisor counted by the device profiler, after every timing (cuda and npu)."""
    note = small_kernels.recount(meas.rows.get("kernels", []), backend)
    if note:
        meas.notes.append(note)


def _count_chain_kernels(meas: Measurements, backend: devmod.Backend, *, hidden: int) -> None:
    """Rescale the decode_chain rows from CHAIN_KERNELS_PER_PASS to the kernels torch_npu.profiler counts."""
    from calibration import npu_kernels

    counted = npu_kernels.count_device_kernels(
        backend, decode_chain(backend, batch=1, hidden=hidden, passes=1)
    )
    if counted <= 0:
        raise RuntimeError(f"profiler counted {counted} kernels in one decode-chain pass")
    chain = _rows(meas, "kernels", mode="decode_chain")
    small_kernels.rescale_to_counted(chain, assumed=CHAIN_KERNELS_PER_PASS, counted=counted)
    meas.notes.append(
        f"kernels per pass: {counted} device kernels per decode-chain pass (torch_npu.profiler; "
        f"{CHAIN_KERNELS_PER_PASS} assumed before)"
    )
