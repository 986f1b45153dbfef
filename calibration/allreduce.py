"""All-reduce microbenchmark over every visible device: one process per device (torch.multiprocessing spawn),
torch.distributed with NCCL (cuda), HCCL (npu) or gloo (cpu, for tests), decode-sized bf16 messages.

Per message size (batch x hidden bf16 at decode, BenchSizes.allreduce_bytes: 8 KiB .. 64 MiB) rank 0 records
    eager   `inner` back-to-back all_reduce calls timed with device events (host clock + barrier on cpu)
    graph   the same calls captured into one CUDA / NPU graph and replayed (what a graphed decode step pays);
            left out when capture fails (the note says why)
with bus_bytes = 2 (n - 1) / n * bytes, the bytes each device sends in a ring all-reduce: the same factor the
roofline applies (planner/perf/roofline.py), so calibration/calibrate.py fits t = latency + bus_bytes / bw
-> allreduce_latency_us and allreduce_bandwidth_fraction = bw / interconnect bandwidth.

The environment is inherited by the workers: keep NCCL_NVLS_ENABLE=0 (and the other multicast switches) set
where the host asks for it. On npu each worker imports torch_npu itself (with TORCH_DEVICE_BACKEND_AUTOLOAD=0,
or torch < 2.5, nothing else would register the npu device or HCCL), and every failure, the import included,
is reported to the parent at once; the parent watches the ranks and returns as soon as one dies, instead of
waiting out the queue timeout. The HCCL path has not run on Ascend hardware (tests/fake_npu drives it on CPU
over gloo).
"""

from __future__ import annotations

import datetime as dt
import os
import queue as queue_mod
import socket
import time
from typing import Any

from calibration.device import DeviceSpec, median_and_spread, tensor_device, time_calls

BF16_BYTES = 2
DIST_BACKEND = {"cuda": "nccl", "npu": "hccl", "cpu": "gloo"}
TIMEOUT_S = 60
POLL_S = 0.2  # how often the parent checks whether a rank died before reporting


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
        out.append(time_calls(None if kind == "cpu" else getattr(torch, kind), fn, inner=inner))
    return out


def _graph_of(torch: Any, kind: str, fn: Any, *, inner: int) -> Any | None:
    """A replay of `inner` calls of fn captured into one device graph, or None (cpu, or capture failed)."""
    if kind == "cpu":
        return None
    accel = getattr(torch, kind)
    graph_cls = getattr(accel, "CUDAGraph", None) or getattr(accel, "NPUGraph", None)
    if graph_cls is None or not hasattr(accel, "graph"):
        raise RuntimeError(f"no graph class in this {kind} build (torch_npu for CANN 8.0.0 has none)")
    graph = graph_cls()
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
        except Exception as exc:  # refused (TASK_QUEUE_ENABLE=2) or absent: eager rows only, noted once
            if not any("note" in r for r in rows):
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


def _rank_device(kind: str, rank: int) -> tuple[Any, Any]:
    """(torch, device) for one rank: torch_npu imported explicitly on npu (autoload may be off); elsewhere
    autoload is switched off so a broken torch_npu cannot break `import torch`."""
    if kind != "npu":
        os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    import torch

    if kind == "npu":
        import torch_npu  # noqa: F401  (registers torch.npu and the hccl backend)
    if kind == "cpu":
        return torch, torch.device("cpu")
    accel = getattr(torch, kind)
    device = tensor_device(torch, accel, DeviceSpec(kind, rank))
    accel.set_device(rank)
    return torch, device


def worker(rank: int, world: int, kind: str, port: int, cfg: dict[str, Any], queue: Any) -> None:
    """One rank: join the group, time every message size; rank 0 puts its rows on the queue. Any failure,
    from the torch_npu import on, is put on the queue by every rank that hits it (the parent keeps the
    first) and the rank exits with status 1 instead of raising into a traceback."""
    import sys

    try:
        torch, device = _rank_device(kind, rank)
        import torch.distributed as dist

        dist.init_process_group(
            DIST_BACKEND[kind],
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=dt.timedelta(seconds=TIMEOUT_S),
            device_id=None if device.type == "cpu" else device,
        )
        rows = _measure(torch, kind=kind, device=device, world=world, cfg=cfg)
        if rank == 0:
            queue.put(rows)
        dist.barrier()
        dist.destroy_process_group()
    except Exception as exc:  # reported to the parent, which records it as one note
        text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        queue.put(f"rank {rank}: {type(exc).__name__}: {text}")
        sys.exit(1)


def _first_result(queue: Any, procs: Any, *, deadline_s: float) -> Any:
    """The first thing a rank reported, polling so that a rank that died silently (killed, segfault) ends
    the wait at once; a string when nothing came or a rank died first."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            return queue.get(timeout=POLL_S)
        except queue_mod.Empty:
            dead = [p.exitcode for p in procs.processes if p.exitcode not in (None, 0)]
            if dead:
                try:
                    return queue.get(timeout=POLL_S)  # its own report may still be in flight
                except queue_mod.Empty:
                    return f"a rank exited with status {dead[0]} before reporting"
    return f"no result from rank 0 within {deadline_s:.0f} s"


def run_allreduce(kind: str, *, world: int, sizes: tuple[int, ...], warmup: int, repeats: int) -> Any:
    """Spawn `world` ranks and return rank 0's rows, or an error string (the first failure reported)."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    cfg = {"sizes": list(sizes), "warmup": warmup, "repeats": repeats, "inner": 20}
    procs = mp.start_processes(
        worker, args=(world, kind, free_port(), cfg, queue), nprocs=world, join=False, start_method="spawn"
    )
    result = _first_result(queue, procs, deadline_s=TIMEOUT_S * 2)
    if not isinstance(result, list):
        for proc in procs.processes:  # one rank failed: do not leave the others waiting on a collective
            if proc.is_alive():
                proc.terminate()
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
