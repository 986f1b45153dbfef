"""End-to-end decode check on a GPU: Hugging Face transformers models with random weights at real shapes.

Not our decode code: transformers' own Qwen3 / Llama modules, its StaticCache, captured into a CUDA graph
(one graph per batch x ctx), with one change a serving engine also makes: decode attention reads each KV head
once (scaled_dot_product_attention with enable_gqa=True, FlashAttention-2 backend forced when it accepts the
call) instead of materialising repeated KV heads. The cache is exactly ctx tokens long and filled with random
values, so the step attends over ctx keys; no prefill is run (its cost is not what is measured).

Records decode_step_s (wall time of one graph replay + host sync), device_step_s (device events) and
the bytes torch allocated for weights and each KV cache (ACCURACY.md).
Run: python -m lab.harness.e2e_decode --out DIR [--models ...] [--batches ...] [--ctx ...] [--per-model-s S]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from calibration.device import Backend, open_backend
from lab.harness import ref_common
from planner import catalog

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

ATTN_NAME = "kvplan_gqa_sdpa"
DEFAULT_MODELS = ("qwen3-8b", "llama-3.1-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b")
HEADROOM_BYTES = 6 * 2**30  # free memory kept beyond the KV cache for activations and graph pools
# One name per column of the CSV (a space-separated string keeps the list on three lines).
CSV_FIELDS = tuple(
    "model card dtype kv_dtype tp engine batch ctx decode_step_s device_step_s spread_fraction replays "  # noqa: SIM905
    "graph "
    "kv_allocated_bytes kv_tensor_bytes".split()
)


def hf_config(card: Any) -> Any:
    """A transformers config with exactly the model card's geometry (HF field names are shared)."""
    return ref_common.hf_config(card.model_dump())


def register_attention(torch: Any, use_flash: bool, *, label: str | None = None) -> None:
    """Register this harness's GQA SDPA under ATTN_NAME: FlashAttention forced, or torch's own pick."""
    ref_common.register_attention(torch, "flash" if use_flash else "default", name=ATTN_NAME, label=label)


def check_gqa_attention(bk: Backend) -> tuple[bool, float]:
    """(flash accepted, relative error) of GQA SDPA against repeated-KV attention in float32."""
    torch = bk.torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    q = torch.randn(4, 32, 1, 128, device=bk.device, dtype=torch.bfloat16)
    k, v = (torch.randn(4, 8, 1000, 128, device=bk.device, dtype=torch.bfloat16) for _ in range(2))
    ref = sdpa(q.float(), k.float().repeat_interleave(4, 1), v.float().repeat_interleave(4, 1))
    out, flash = sdpa(q, k, v, enable_gqa=True), False
    if bk.kind == "cuda":
        try:
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                out = sdpa(q, k, v, enable_gqa=True)
            flash = True
        except RuntimeError:
            flash = False
    err = float((out.float() - ref).norm() / ref.norm())
    if not err < 1e-2:
        raise RuntimeError(
            f"GQA attention disagrees with the repeated-KV reference (relative error {err:.2e})"
        )
    return flash, err


def make_cache(config: Any, *, batch: int, ctx: int, bk: Backend) -> Any:
    """A transformers StaticCache of exactly ctx tokens (v5 signature first, then the 4.x one)."""
    from transformers import StaticCache

    try:
        return StaticCache(config=config, max_cache_len=ctx)
    except TypeError:
        return StaticCache(
            config=config, max_batch_size=batch, max_cache_len=ctx, device=bk.device, dtype=bk.torch.bfloat16
        )


def cache_tensors(cache: Any) -> list[Any]:
    """Every key/value tensor the cache holds (v5 `layers[i].keys/values`, 4.x `key_cache/value_cache`)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [
            t
            for layer in layers
            for t in (getattr(layer, "keys", None), getattr(layer, "values", None))
            if t is not None and hasattr(t, "numel")
        ]
    return [*cache.key_cache, *cache.value_cache]


class Stepper(ref_common.DecodeStep):
    """Static decode inputs for one (batch, ctx) and the step function the graph captures."""

    def __init__(self, model: Any, cache: Any, *, batch: int, ctx: int, bk: Backend) -> None:
        super().__init__(bk.torch, model, cache, batch=batch, ctx=ctx, device=bk.device)

    def __call__(self) -> None:
        self.ids.copy_(self.forward()[:, -1, :].argmax(-1, keepdim=True))


def time_point(bk: Backend, replay: Any, *, budget_s: float) -> dict[str, Any]:
    """Wall time per replay+sync (median of several) and device-event time of back-to-back replays."""
    for _ in range(3):
        replay()
    bk.synchronize()
    probe = time.perf_counter()
    replay()
    bk.synchronize()
    one = time.perf_counter() - probe
    count = int(min(50, max(5, budget_s / max(one, 1e-4) / 3)))
    return timed_replays(bk, replay, count=count)


def timed_replays(bk: Backend, replay: Any, *, count: int) -> dict[str, Any]:
    """Median wall time of `count` replay + sync, device-event time, spread = (p90 - min) / median."""
    wall = []
    for _ in range(count):
        start = time.perf_counter()
        replay()
        bk.synchronize()
        wall.append(time.perf_counter() - start)
    device_s = bk.timer(replay, inner=count)
    middle = statistics.median(wall)
    return {
        "decode_step_s": middle,
        "device_step_s": device_s,
        "spread_fraction": (statistics.quantiles(wall, n=10)[-1] - min(wall)) / middle,
        "replays": count,
    }


def capture(bk: Backend, step: Stepper) -> tuple[Any, bool]:
    """Graph replay of the step (CUDA graph; warmed up on a side stream); the eager step when unavailable."""
    try:
        replay = bk.capture_graph(step)
    except RuntimeError as exc:
        print(f"  graph capture failed ({str(exc).splitlines()[0][:160]}); timing eager", flush=True)
        bk.synchronize()
        replay = None
    return (replay, True) if replay is not None else (step, False)


def kv_bytes_needed(card: Any, *, batch: int, ctx: int) -> int:
    """2 (K and V) * layers * kv heads * head_dim * 2 bytes (bf16) per token, times batch * ctx."""
    return 2 * card.num_hidden_layers * card.num_key_value_heads * (card.head_dim or 0) * 2 * batch * ctx


def free_bytes(bk: Backend) -> int:
    """Free device memory (a large number on cpu, where nothing is sized from it)."""
    info = bk.mem_get_info()
    return info[0] if info else 2**62


def empty_cache(bk: Backend) -> None:
    """Return cached blocks to the device so memory_allocated deltas and mem_get_info stay honest."""
    bk.synchronize()
    if bk.accel is not None:
        bk.accel.empty_cache()


def run_point(bk: Backend, model: Any, card: Any, *, batch: int, ctx: int, budget_s: float) -> dict[str, Any]:
    """One (batch, ctx): allocate and randomise the cache, capture, time; returns a CSV row."""
    before = bk.memory_allocated()
    cache = make_cache(model.config, batch=batch, ctx=ctx, bk=bk)
    step = Stepper(model, cache, batch=batch, ctx=ctx, bk=bk)
    inputs_bytes = sum(t.numel() * t.element_size() for t in (step.ids, step.pos, step.cache_position))
    with bk.torch.no_grad():
        step()  # lazily allocates the cache layers
    bk.synchronize()
    tensors = cache_tensors(cache)
    kv_tensor_bytes = sum(t.numel() * t.element_size() for t in tensors)
    kv_allocated = bk.memory_allocated() - before - inputs_bytes
    for t in tensors:
        t.normal_()
    with bk.torch.no_grad():
        replay, graphed = capture(bk, step)
        timing = time_point(bk, replay, budget_s=budget_s)
    row = {
        "model": card.id,
        "card": "nvidia-h200",
        "dtype": "bf16",
        "kv_dtype": "bf16",
        "tp": 1,
        "engine": "transformers",  # planner/engines.py: HF modules in a CUDA graph
        "batch": batch,
        "ctx": ctx,
        "graph": graphed,
        "kv_allocated_bytes": kv_allocated,
        "kv_tensor_bytes": kv_tensor_bytes,
        **timing,
    }
    del replay, step, cache, tensors
    empty_cache(bk)
    return row


def build_model(bk: Backend, card: Any) -> Any:
    """transformers' AutoModelForCausalLM from the card's geometry, random weights, bf16, on the device."""
    from transformers import AutoModelForCausalLM

    config = hf_config(card)
    config._attn_implementation = ATTN_NAME
    kwargs: dict[str, Any] = {"dtype": bk.torch.bfloat16, "attn_implementation": ATTN_NAME}
    if card.is_moe:
        kwargs["experts_implementation"] = (
            "grouped_mm"  # sort + histc + grouped GEMM: no host sync, capturable
        )
    with bk.torch.device(bk.device):
        model = AutoModelForCausalLM.from_config(config, **kwargs)
    return model.eval()


def run_model(
    bk: Backend, model_id: str, *, grid: tuple[list[int], list[int]], budget_s: float, writer: Any
) -> dict[str, Any]:
    """Build one model, then time every (batch, ctx) point that fits, within budget_s."""
    batches, contexts = grid
    card = catalog.load_model(model_id)
    empty_cache(bk)
    start, before = time.perf_counter(), bk.memory_allocated()
    model = build_model(bk, card)
    bk.synchronize()
    info = {
        "model": model_id,
        "weights_allocated_bytes": bk.memory_allocated() - before,
        "parameter_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "buffer_bytes": sum(b.numel() * b.element_size() for b in model.buffers()),
        "attn_implementation": model.config._attn_implementation,
        "build_s": time.perf_counter() - start,
        "points": 0,
        "skipped": [],
    }
    print(
        f"[e2e] {model_id}: {info['parameter_bytes'] / 2**30:.2f} GiB of parameters, "
        f"built in {info['build_s']:.1f} s",
        flush=True,
    )
    oom = getattr(bk.torch, "OutOfMemoryError", RuntimeError)
    for ctx in contexts:
        for batch in batches:
            if kv_bytes_needed(card, batch=batch, ctx=ctx) + HEADROOM_BYTES > free_bytes(bk):
                info["skipped"].append(f"b{batch} ctx{ctx}: KV does not fit")
                continue
            if time.perf_counter() > start + budget_s:
                info["skipped"].append(f"b{batch} ctx{ctx}: model time budget spent")
                continue
            try:
                row = run_point(bk, model, card, batch=batch, ctx=ctx, budget_s=1.0)
            except oom:
                empty_cache(bk)
                info["skipped"].append(f"b{batch} ctx{ctx}: out of memory")
                continue
            writer.writerow({k: row.get(k) for k in CSV_FIELDS})
            info["points"] += 1
            print(
                f"  b={batch:4d} ctx={ctx:5d} step={row['decode_step_s'] * 1e3:8.3f} ms "
                f"dev={row['device_step_s'] * 1e3:8.3f} ms graph={row['graph']} "
                f"kv={row['kv_allocated_bytes']}/{row['kv_tensor_bytes']}",
                flush=True,
            )
    info["total_s"] = time.perf_counter() - start
    del model
    empty_cache(bk)
    return info


def main() -> None:
    """Run every model in turn; write e2e_decode.csv and e2e_memory.json under --out."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--batches", default="1,8,32,64,128")
    parser.add_argument("--ctx", default="512,2048,8192")
    parser.add_argument("--per-model-s", type=float, default=75.0)
    parser.add_argument(
        "--attn-backend",
        choices=("flash", "default"),
        default="flash",
        help="flash: FlashAttention forced (runs 1-4); default: torch SDPA picks (cuDNN on H200)",
    )
    args = parser.parse_args()
    bk = open_backend(args.device)
    import transformers

    args.out.mkdir(parents=True, exist_ok=True)
    flash, err = check_gqa_attention(bk)
    flash = flash and args.attn_backend == "flash"
    register_attention(bk.torch, flash)
    meta: dict[str, Any] = {
        "torch": bk.torch.__version__,
        "transformers": transformers.__version__,
        "device": bk.device_name(),
        "flash_forced": flash,
        "gqa_relative_error": err,
        "models": [],
    }
    print(
        f"[e2e] {meta['device']} torch {meta['torch']} transformers {meta['transformers']} flash={flash}",
        flush=True,
    )
    grid = ([int(b) for b in args.batches.split(",")], [int(c) for c in args.ctx.split(",")])
    with open(args.out / "e2e_decode.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for model_id in args.models.split(","):
            try:
                meta["models"].append(
                    run_model(bk, model_id, grid=grid, budget_s=args.per_model_s, writer=writer)
                )
            except Exception as exc:
                meta["models"].append({"model": model_id, "error": f"{type(exc).__name__}: {exc}"[:500]})
                print(f"[e2e] {model_id} failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                empty_cache(bk)
            handle.flush()
            (args.out / "e2e_memory.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
