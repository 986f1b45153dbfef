"""End-to-end decode-step reference (dense Qwen3 and hybrid Qwen3.5), random weights at real shapes, bf16.

transformers' own modules and StaticCache (exactly ctx long, filled with random values), one CUDA graph per
(batch, ctx). Attention: SDPA with enable_gqa=True and no mask, the backend chosen by `--attn-backend`
("default" = torch's own dispatch, not forced), or transformers' native "sdpa" implementation ("hf_sdpa":
its causal mask + repeat_kv). Hybrid models run their Gated DeltaNet layers through whatever transformers
resolved at import (flash-linear-attention kernels when importable, else its torch reference; recorded).

transformers 5.x StaticLayer keeps a device counter (cumulative_length) that each update advances; the step
resets every counter to ctx - 1 first (two foreach kernels inside the graph), so every replay writes the
same slot and attends over exactly ctx keys.
"""

from __future__ import annotations

import time
from typing import Any

from lab.harness.ref_common import (
    ATTN_NAME,
    DecodeStep,
    build_model,
    device_time,
    graph_of,
    is_hybrid,
    load_card,
)

CSV_FIELDS = tuple(
    "model card dtype kv_dtype tp engine batch ctx decode_step_s device_step_s spread_fraction replays graph "  # noqa: SIM905
    "kv_allocated_bytes kv_tensor_bytes attn_backend attn_pick gdn_kernels state_tensor_bytes finite".split()
)
HEADROOM = 8 * 2**30


def cache_for(config: Any, ctx: int) -> Any:
    """StaticCache of exactly ctx tokens (hybrid configs get linear-attention state layers too)."""
    from transformers import StaticCache

    return StaticCache(config=config, max_cache_len=ctx)


def cache_parts(cache: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """(KV tensors, linear-attention state tensors, StaticLayer position counters) of an initialised cache."""
    kv, state, counters = [], [], []
    for layer in cache.layers:
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            if t is not None and hasattr(t, "numel"):
                kv.append(t)
        for name in ("conv_states", "recurrent_states"):
            for t in (getattr(layer, name, None) or {}).values():
                if t is not None:
                    state.append(t)
        if getattr(layer, "is_initialized", False) and hasattr(layer, "cumulative_length"):
            counters.append(layer.cumulative_length)
    return kv, state, counters


class Step(DecodeStep):
    """Static decode inputs for one (batch, ctx); calling it runs one step in place (graph-capturable)."""

    def __init__(self, torch: Any, model: Any, cache: Any, *, batch: int, ctx: int) -> None:
        super().__init__(torch, model, cache, batch=batch, ctx=ctx, device="cuda")
        self.torch, self.ctx = torch, ctx
        self.counters: list[Any] = []
        self.logits: Any = None

    def __call__(self) -> None:
        if self.counters:
            self.torch._foreach_mul_(self.counters, 0)
            self.torch._foreach_add_(self.counters, self.ctx - 1)
        self.logits = self.forward()
        self.ids.copy_(self.logits[:, -1, :].argmax(-1, keepdim=True))


def run_point(torch: Any, model: Any, *, batch: int, ctx: int) -> dict[str, Any]:
    """Allocate + randomise the cache, capture one step, time replays (events and wall+sync)."""
    before = torch.cuda.memory_allocated()
    cache = cache_for(model.config, ctx)
    step = Step(torch, model, cache, batch=batch, ctx=ctx)
    with torch.no_grad():
        step()  # lazily allocates KV and (hybrid) state tensors
        torch.cuda.synchronize()
        kv, state, counters = cache_parts(cache)
        allocated = torch.cuda.memory_allocated() - before
        for t in kv:
            t.normal_()
        for t in state:
            t.normal_(0.0, 0.1)
        step.counters = counters
        try:
            replay, graphed = graph_of(torch, step), True
        except RuntimeError as exc:
            print(f"  capture failed: {str(exc).splitlines()[0][:200]}; timing eager", flush=True)
            torch.cuda.synchronize()
            replay, graphed = step, False
        timing = device_time(torch, replay, min_s=0.25, max_reps=60)
        wall = []
        for _ in range(min(20, timing["reps"])):
            t0 = time.perf_counter()
            replay()
            torch.cuda.synchronize()
            wall.append(time.perf_counter() - t0)
        finite = bool(torch.isfinite(step.logits).all())
    wall.sort()
    return {
        "batch": batch,
        "ctx": ctx,
        "decode_step_s": wall[len(wall) // 2],
        "device_step_s": timing["median_s"],
        "spread_fraction": timing["spread"],
        "replays": timing["reps"],
        "graph": graphed,
        "kv_allocated_bytes": allocated,
        "kv_tensor_bytes": sum(t.numel() * t.element_size() for t in kv),
        "state_tensor_bytes": sum(t.numel() * t.element_size() for t in state),
        "finite": finite,
    }


def kv_need(card: dict[str, Any], batch: int, ctx: int) -> int:
    """KV bytes of the full-attention layers at bf16, plus a rough GDN state allowance."""
    layers = card["num_hidden_layers"]
    if is_hybrid(card):
        full = layers // card.get("full_attention_interval", 4)
        lin = layers - full
        state = (
            lin
            * card["linear_num_value_heads"]
            * card["linear_key_head_dim"]
            * card["linear_value_head_dim"]
            * 4
        )
        return 2 * full * card["num_key_value_heads"] * card["head_dim"] * 2 * batch * ctx + state * batch
    return 2 * layers * card["num_key_value_heads"] * card["head_dim"] * 2 * batch * ctx


def run_model(
    torch: Any,
    model_id: str,
    points: list[tuple[int, int]],
    *,
    backend: str,
    budget_s: float,
    writer: Any,
    log: Any,
    attn_pick: str = "",
) -> dict[str, Any]:
    """Build one model and time every (batch, ctx) that fits within budget_s."""
    card = load_card(model_id)
    free = int(torch.cuda.mem_get_info()[0])
    t0 = time.perf_counter()
    model = build_model(torch, card, attn="sdpa" if backend == "hf_sdpa" else ATTN_NAME)
    torch.cuda.synchronize()
    info: dict[str, Any] = {
        "model": model_id,
        "backend": backend,
        "build_s": time.perf_counter() - t0,
        "weights_bytes": free - int(torch.cuda.mem_get_info()[0]),
        "skipped": [],
        "points": 0,
    }
    gdn = gdn_impl() if is_hybrid(card) else ""
    info["gdn_kernels"] = gdn
    log(f"[decode] {model_id} ({backend}) built in {info['build_s']:.1f} s; gdn={gdn or '-'}")
    for batch, ctx in points:
        if time.perf_counter() - t0 > budget_s:
            info["skipped"].append(f"b{batch} ctx{ctx}: budget")
            continue
        if kv_need(card, batch, ctx) + HEADROOM > int(torch.cuda.mem_get_info()[0]):
            info["skipped"].append(f"b{batch} ctx{ctx}: does not fit")
            continue
        try:
            row = run_point(torch, model, batch=batch, ctx=ctx)
        except torch.OutOfMemoryError:
            info["skipped"].append(f"b{batch} ctx{ctx}: OOM")
            torch.cuda.empty_cache()
            continue
        row.update(
            model=model_id,
            card="nvidia-h200",
            dtype="bf16",
            kv_dtype="bf16",
            tp=1,
            engine="transformers",
            attn_backend=backend,
            attn_pick=attn_pick,
            gdn_kernels=gdn,
        )
        writer.writerow({k: row.get(k) for k in CSV_FIELDS})
        info["points"] += 1
        log(
            f"  {model_id} b={batch:4d} ctx={ctx:6d} dev={row['device_step_s'] * 1e3:8.3f} ms "
            f"wall={row['decode_step_s'] * 1e3:8.3f} ms graph={row['graph']} finite={row['finite']}"
        )
        torch.cuda.empty_cache()
    info["total_s"] = time.perf_counter() - t0
    del model
    torch.cuda.empty_cache()
    return info


def gdn_impl() -> str:
    """Which implementation transformers bound for the GDN recurrent/chunk rules and the conv update."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

    def origin(fn: Any) -> str:
        inner = fn
        while hasattr(inner, "__wrapped__"):
            inner = inner.__wrapped__
        return "torch" if inner.__module__.startswith("transformers") else inner.__module__.split(".")[0]

    frames = []
    for name in ("torch_recurrent_gated_delta_rule", "torch_chunk_gated_delta_rule", "causal_conv1d_update"):
        fn = getattr(mq, name)
        frames.append(f"{name.replace('torch_', '')}={resolved(fn) or origin(fn)}")
    return ";".join(frames)


def resolved(fn: Any) -> str:
    """The module of the implementation a use_kernel_func_from_hub_with_fallback wrapper calls, if visible."""
    for cell in getattr(fn, "__closure__", None) or ():
        value = cell.cell_contents
        if (
            callable(value)
            and getattr(value, "__module__", "")
            and not value.__module__.startswith("transformers")
        ):
            return str(value.__module__).split(".")[0]
    return ""
