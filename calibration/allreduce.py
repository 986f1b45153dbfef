"""All-reduce microbenchmark over every visible device: one process per device (torch.multiprocessing spawn),
torch.distributed with NCCL (cuda), HCCL (npu) or gloo (cpu, for tests), decode-sized bf16 messages.

Per message size (batch x hidden bf16 at decode, BenchSizes.allreduce_bytes: 8 KiB .. 64 MiB) rank 0 records
    eager   `inner` back-to-back all_reduce calls timed with device events (host clock + barrier on cpu)
    graph   the same calls captured into one CUDA / NPU graph and replayed (what a graphed decode step pays);
            left out when capture fails (the note says why)
with bus_bytes = 2 (n - 1) / n * bytes, the bytes each device sends in a ring all-reduce: the same factor the
roofline applies (planner/roofline.py), so calibration/calibrate.py fits t = latency + bus_bytes / bw
-> allreduce_latency_us and allreduce_bandwidth_fraction = bw / interconnect bandwidth.

The environment is inherited by the workers: keep NCCL_NVLS_ENABLE=0 (and the other multicast switches) set
where the host asks for it.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import time
from typing import Any

from calibration.device import median_and_spread

BF16_BYTES = 2
DIST_BACKEND = {"cuda": "nccl", "npu": "hccl", "cpu": "gloo"}
TIMEOUT_S = 60


def free_port() -> int:
    """An unused localhost TCP port for the process group's rendezvous."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ring_bus_bytes(message_bytes: int, *, world: int) -> float:
    """Bytes each rank sends in a ring all-reduce: 2 (n - 1) / n * message bytes."""
    return 2.0 * (world - 1) / world * message_bytes


def _timed(torch: Any, fn: Any, *, kind: str, inner: int, repeats: int) -> list[float]:
    """Seconds per call over `repeats` timings of `inner` calls (events on devices, host clock on cpu)."""
    import torch.distributed as dist

    out = []
    for _ in range(repeats):
        dist.barrier()
        if kind == "cpu":
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            out.append((time.perf_counter() - start) / inner)
            continue
        accel = getattr(torch, kind)
        begin, end = accel.Event(enable_timing=True), accel.Event(enable_timing=True)
        begin.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        out.append(begin.elapsed_time(end) / 1e3 / inner)  # events report ms
    return out


def _graph_of(torch: Any, kind: str, fn: Any, *, inner: int) -> Any | None:
    """A replay of `inner` calls of fn captured into one device graph, or None (cpu, or capture failed)."""
    if kind == "cpu":
        return None
    accel = getattr(torch, kind)
    graph = (getattr(accel, "CUDAGraph", None) or accel.NPUGraph)()
    with accel.graph(graph):
        for _ in range(inner):
            fn()
    accel.synchronize()
    return graph.replay


def _measure(torch: Any, *, kind: str, device: Any, world: int, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    import torch.distributed as dist

    rows: list[dict[str, Any]] = []
    inner, repeats = cfg["inner"], cfg["repeats"]
    for size in cfg["sizes"]:
        x = torch.ones(size // BF16_BYTES, device=device, dtype=torch.bfloat16)

        def call(x: Any = x) -> None:
            dist.all_reduce(x)

        for _ in range(cfg["warmup"]):
            call()
        modes = [("eager", call, inner)]
        try:
            replay = _graph_of(torch, kind, call, inner=inner)
        except RuntimeError as exc:
            rows.append({"note": f"graph capture failed: {str(exc).splitlines()[0][:160]}"})
            replay = None
        if replay is not None:
            modes.append(("graph", replay, 1))
        for mode, fn, calls in modes:
            seconds = [
                s / (inner // calls) for s in _timed(torch, fn, kind=kind, inner=calls, repeats=repeats)
            ]
            middle, spread = median_and_spread(seconds)
            rows.append(
                dict(
                    mode=mode,
                    bytes=size,
                    world=world,
                    bus_bytes=ring_bus_bytes(size, world=world),
                    median_s=middle,
                    spread_fraction=spread,
                    samples_s=seconds,
                )
            )
    return rows


def worker(rank: int, world: int, kind: str, port: int, cfg: dict[str, Any], queue: Any) -> None:
    """One rank: join the group, time every message size, rank 0 puts its rows (or the error) on the queue."""
    import torch
    import torch.distributed as dist

    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    device = torch.device("cpu") if kind == "cpu" else torch.device(f"{kind}:{rank}")
    if kind != "cpu":
        getattr(torch, kind).set_device(device)
    try:
        dist.init_process_group(
            DIST_BACKEND[kind],
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=dt.timedelta(seconds=TIMEOUT_S),
            device_id=None if kind == "cpu" else device,
        )
        rows = _measure(torch, kind=kind, device=device, world=world, cfg=cfg)
        if rank == 0:
            queue.put(rows)
        dist.barrier()
        dist.destroy_process_group()
    except Exception as exc:  # reported to the parent, which records it as a note
        if rank == 0:
            queue.put(f"{type(exc).__name__}: {str(exc)[:300]}")
        raise


def run_allreduce(kind: str, *, world: int, sizes: tuple[int, ...], warmup: int, repeats: int) -> Any:
    """Spawn `world` ranks and return rank 0's rows, or an error string."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    cfg = {"sizes": list(sizes), "warmup": warmup, "repeats": repeats, "inner": 20}
    procs = mp.start_processes(
        worker, args=(world, kind, free_port(), cfg, queue), nprocs=world, join=False, start_method="spawn"
    )
    try:
        result = queue.get(timeout=TIMEOUT_S * 2)
    except Exception as exc:  # queue.Empty: the ranks hung or died before reporting
        result = f"no result from rank 0 ({type(exc).__name__})"
    try:
        procs.join(timeout=TIMEOUT_S)
    except Exception as exc:  # a rank failed after reporting: keep what rank 0 reported
        result = result if isinstance(result, list) else f"{result}; {exc}"[:400]
    return result


def allreduce_rows(suite: Any) -> None:
    """The suite's all-reduce step: every visible device when more than one is visible; else a note."""
    count = suite.backend.device_count()
    if count < 2 and not getattr(suite, "allreduce_world", 0):
        suite.out.notes.append("allreduce_*: one device visible; all-reduce not measured")
        return
    world = getattr(suite, "allreduce_world", 0) or count
    result = run_allreduce(
        suite.backend.kind,
        world=world,
        sizes=suite.sizes.allreduce_bytes,
        warmup=suite.sizes.warmup,
        repeats=suite.sizes.repeats,
    )
    if isinstance(result, str):
        suite.out.notes.append(f"allreduce: failed ({result})")
        return
    for row in result:
        if "note" in row:
            suite.out.notes.append(f"allreduce: {row['note']}")
        else:
            suite.out.add("allreduce", **row)
