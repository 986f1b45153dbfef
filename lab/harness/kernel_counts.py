"""Kernels per decode step of Hugging Face transformers' modules, attributed to ops with torch.profiler.

The data behind planner/engines.py's "transformers" engine. For each model (random weights, the card's
geometry, the same attention and cache as lab/harness/e2e_decode.py) and each (batch, ctx) point it runs one
eager decode step under torch.profiler and counts the device kernels. Every module's forward runs inside a
`record_function("kv::<module path>")` range (layer indices dropped, so all layers share one label), and so
do the rotary embedding (`apply_rotary_pos_emb`), the cache update (`cache.update`) and the attention call;
each kernel is attributed to the innermost range around the aten op that launched it. Kernels outside the
model's forward (argmax, feeding the token back) are labelled "kv::sample". The eager kernel sequence is what
a CUDA graph of the step captures and replays, so these counts are the graph's kernels too.

Output JSON: per model and point, the total kernels and, per label, the kernel count and kernel names.
planner/engines.py maps labels to planner ops (see its docstring); nothing here knows the planner's ops.

Run: python -m lab.harness.kernel_counts --out FILE [--models ...] [--points 1x512,64x2048] [--time DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from calibration.device import Backend, open_backend
from calibration.microbench import CHAIN_KERNELS_PER_PASS, decode_chain
from lab.harness import e2e_decode
from planner import catalog

PREFIX = "kv::"
LAYER_INDEX = re.compile(r"\.\d+(?=\.|$)")


def label_of(module_path: str) -> str:
    """`model.layers.7.self_attn.q_proj` -> `kv::model.layers.self_attn.q_proj` (all layers share it)."""
    return PREFIX + LAYER_INDEX.sub("", module_path)


def annotate_modules(torch: Any, model: Any) -> list[Any]:
    """Forward pre/post hooks that open and close a record_function range per module; returns handles."""
    handles = []
    for path, module in model.named_modules():
        stack: list[Any] = []

        def enter(
            _module: Any, _args: Any, label: str = label_of(path or "root"), st: list[Any] = stack
        ) -> None:
            rf = torch.profiler.record_function(label)
            rf.__enter__()
            st.append(rf)

        def leave(_module: Any, _args: Any, _out: Any, st: list[Any] = stack) -> None:
            st.pop().__exit__(None, None, None)

        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave))
    return handles


def labelled(torch: Any, fn: Any, label: str) -> Any:
    """fn wrapped in a record_function range."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(label):
            return fn(*args, **kwargs)

    return wrapper


def innermost_label(event: Any) -> str:
    """The closest enclosing kv:: range of a profiler event (walks cpu_parent)."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith(PREFIX):
            return str(parent.name)
        parent = parent.cpu_parent
    return PREFIX + "sample"


def count_kernels(torch: Any, fn: Any, bk: Backend) -> dict[str, Any]:
    """Profile one call of fn; kernels per innermost label (with names) and the device-side total."""
    from torch.profiler import ProfilerActivity, profile

    bk.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        bk.synchronize()
    events = prof.events()
    by_label: dict[str, Counter[str]] = {}
    for event in events:
        kernels = [k.name for k in getattr(event, "kernels", None) or []]
        if bk.kind == "cpu" and event.name.startswith("aten::") and not event.cpu_children:
            kernels = [event.name]  # dry run on cpu: leaf aten ops stand in for kernels
        if kernels and event.device_type.name == "CPU":
            names = by_label.setdefault(innermost_label(event), Counter())
            names.update(k[:120] for k in kernels)
    device = Counter(e.name[:120] for e in events if e.device_type.name == "CUDA")
    return {
        "total_kernels": sum(sum(c.values()) for c in by_label.values()),
        "device_events": sum(device.values()),
        "by_label": {k: {"kernels": sum(c.values()), "names": dict(c)} for k, c in sorted(by_label.items())},
        "device_names": dict(device),
    }


def profile_point(bk: Backend, model: Any, card: Any, *, batch: int, ctx: int) -> dict[str, Any]:
    """One eager decode step at (batch, ctx), profiled; the cache update and rope are labelled."""
    torch = bk.torch
    cache = e2e_decode.make_cache(model.config, batch=batch, ctx=ctx, bk=bk)
    step = e2e_decode.Stepper(model, cache, batch=batch, ctx=ctx, bk=bk)
    with torch.no_grad():
        step()  # lazily allocates the cache layers
        cache.update = labelled(torch, cache.update, PREFIX + "cache_update")
        step()
        counts = count_kernels(torch, step, bk)
    del step, cache
    e2e_decode.empty_cache(bk)
    return {"model": card.id, "batch": batch, "ctx": ctx, "layers": card.num_hidden_layers, **counts}


def patch_rope(torch: Any, model: Any) -> None:
    """Label the model module's apply_rotary_pos_emb (the attention forward calls it by global name)."""
    module = sys.modules[type(model).__module__]
    rope = getattr(module, "apply_rotary_pos_emb", None)
    if rope is not None:
        module.apply_rotary_pos_emb = labelled(torch, rope, PREFIX + "rope")


def chain_check(bk: Backend) -> dict[str, Any]:
    """Kernels of one pass of microbench.decode_chain (the kernel_overhead_us benchmark) vs its constant.
    npu: counted by torch_npu.profiler (kernel_details.csv rows; calibration/npu_kernels.py), never run on an
    Ascend device; the per-module attribution below stays CUDA-only."""
    chain = decode_chain(bk, batch=1, hidden=4096, passes=1)
    if bk.kind == "npu":
        from calibration import npu_kernels

        return {"expected": CHAIN_KERNELS_PER_PASS, "counted": npu_kernels.count_device_kernels(bk, chain)}
    counts = count_kernels(bk.torch, chain, bk)
    return {"expected": CHAIN_KERNELS_PER_PASS, "counted": counts["total_kernels"], **counts}


def run_model(
    bk: Backend, model_id: str, *, points: list[tuple[int, int]], timed: list[tuple[int, int]]
) -> dict:  # type: ignore[type-arg]
    """Build one model, profile its points, then (hooks removed) time `timed` points as e2e_decode does."""
    card = catalog.load_model(model_id)
    model = e2e_decode.build_model(bk, card)
    patch_rope(bk.torch, model)
    handles = annotate_modules(bk.torch, model)
    out: dict[str, Any] = {"model": model_id, "points": [], "timed": []}
    for batch, ctx in points:
        start = time.perf_counter()
        out["points"].append(profile_point(bk, model, card, batch=batch, ctx=ctx))
        got = out["points"][-1]
        print(
            f"[kernels] {model_id} b={batch} ctx={ctx}: {got['total_kernels']} kernels "
            f"({got['total_kernels'] / card.num_hidden_layers:.1f} per layer), device events "
            f"{got['device_events']}, {time.perf_counter() - start:.1f} s",
            flush=True,
        )
    for handle in handles:
        handle.remove()
    for batch, ctx in timed:
        row = e2e_decode.run_point(bk, model, card, batch=batch, ctx=ctx, budget_s=1.0)
        out["timed"].append(row)
        print(f"[timed] {model_id} b={batch} ctx={ctx}: {row['decode_step_s'] * 1e3:.3f} ms", flush=True)
    del model
    e2e_decode.empty_cache(bk)
    return out


def _pairs(text: str) -> list[tuple[int, int]]:
    return [(int(b), int(c)) for b, c in (p.split("x") for p in text.split(",") if p)]


def main() -> None:
    """Profile every model; write one JSON file."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--models", default=",".join(e2e_decode.DEFAULT_MODELS))
    parser.add_argument("--points", default="1x512,64x2048")
    parser.add_argument("--time", default="", help="model:BxC;... points to time after profiling")
    args = parser.parse_args()
    bk = open_backend(args.device)
    import transformers

    flash, _ = e2e_decode.check_gqa_attention(bk) if bk.kind == "cuda" else (False, 0.0)
    e2e_decode.register_attention(bk.torch, flash, label=PREFIX + "attention")
    timed = dict(item.split(":") for item in args.time.split(";") if item)
    result: dict[str, Any] = {
        "tool": "lab/harness/kernel_counts.py",
        "device": bk.device_name(),
        "torch": bk.torch.__version__,
        "transformers": transformers.__version__,
        "flash_forced": flash,
        "chain_check": chain_check(bk) if bk.kind in ("cuda", "npu") else None,
        "models": [],
    }
    for model_id in args.models.split(","):
        try:
            result["models"].append(
                run_model(bk, model_id, points=_pairs(args.points), timed=_pairs(timed.get(model_id, "")))
            )
        except Exception as exc:
            result["models"].append({"model": model_id, "error": f"{type(exc).__name__}: {exc}"[:500]})
            print(f"[kernels] {model_id} failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            e2e_decode.empty_cache(bk)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
