"""One Gated DeltaNet (Qwen3.5 linear-attention) decode step per layer: time vs batch, kernels per layer.

transformers' Qwen3_5GatedDeltaNet modules at a model card's geometry (bf16 weights, N(0, 0.02)), stacked N
deep (distinct weights and cache layers, so small layers are not served from L2), one token per sequence,
recurrent state present (the decode path: causal_conv1d_update + fused recurrent gated delta rule). Timed as
a CUDA-graph replay of the N-layer stack (per layer = total / N) and eagerly (host-bound launch cost), and
profiled with torch.profiler for kernel count and device time per kernel category. Run once with the
implementation transformers resolved at import (fla when importable) and once with transformers' torch
reference forced for the recurrent rule ("torch" label).
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

from lab.harness.ref_common import (
    device_time,
    graph_of,
    hf_config,
    load_card,
    profile_kernels,
    summarise_kernels,
)

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
STACK_BYTES = 400 * 2**20


def build_stack(torch: Any, card: dict[str, Any]) -> tuple[Any, list[Any]]:
    """(config, N GDN layers) with N chosen so the stack's weights exceed STACK_BYTES."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet

    base = hf_config(card)
    probe = Qwen3_5GatedDeltaNet(base, 0)
    per_layer = sum(p.numel() for p in probe.parameters()) * 2
    n = max(2, min(16, math.ceil(STACK_BYTES / per_layer)))
    config = copy.deepcopy(base)
    config.num_hidden_layers = n
    config.layer_types = ["linear_attention"] * n
    with torch.device("cuda"):
        layers = [Qwen3_5GatedDeltaNet(config, i).to(torch.bfloat16).eval() for i in range(n)]
    with torch.no_grad():
        for layer in layers:
            for name, p in layer.named_parameters():
                if name == "A_log":
                    p.uniform_(0.0, 2.7)
                elif name in ("dt_bias", "norm.weight"):
                    p.fill_(1.0)
                else:
                    p.normal_(0.0, 0.02)
    return config, layers


class StackStep:
    """One decode token through the N-layer stack with a primed StaticCache."""

    def __init__(self, torch: Any, config: Any, layers: list[Any], batch: int) -> None:
        from transformers import StaticCache

        self.layers = layers
        self.cache = StaticCache(config=config, max_cache_len=16)
        self.x = torch.randn(batch, 1, config.hidden_size, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            self.run()  # primes conv/recurrent states (chunk path, seq_len 1)
        for layer in self.cache.layers:
            for t in list(layer.recurrent_states.values()) + list(layer.conv_states.values()):
                if t is not None:
                    t.normal_(0.0, 0.1)
        self.out: Any = None

    def run(self) -> None:
        h = self.x
        for layer in self.layers:
            h = layer(h, cache_params=self.cache)
        self.out = h

    def state_bytes(self) -> int:
        """Bytes of conv + recurrent state held per the whole stack."""
        total = 0
        for layer in self.cache.layers:
            for t in list(layer.recurrent_states.values()) + list(layer.conv_states.values()):
                total += 0 if t is None else t.numel() * t.element_size()
        return total

    def state_dtype(self) -> str:
        """dtype of the recurrent state tensor."""
        t = self.cache.layers[0].recurrent_states.get(0)
        return "none" if t is None else str(t.dtype)


def measure(torch: Any, config: Any, layers: list[Any], batch: int, label: str) -> dict[str, Any]:
    """Graph and eager time per layer, kernel profile per layer, at one batch."""
    step = StackStep(torch, config, layers, batch)
    n = len(layers)
    with torch.no_grad():
        eager = device_time(torch, step.run, min_s=0.05, max_reps=50)
        try:
            graph = device_time(torch, graph_of(torch, step.run), min_s=0.05, max_reps=200)["median_s"]
        except RuntimeError as exc:
            torch.cuda.synchronize()
            graph = None
            print(f"  [gdn] capture failed ({str(exc).splitlines()[0][:120]})", flush=True)
        kernels = profile_kernels(torch, step.run)
        prof = summarise_kernels(kernels)
        finite = bool(torch.isfinite(step.out).all())
    per_cat = {k: {"n": v["n"] / n, "us": v["us"] / n} for k, v in prof["by_cat"].items()}
    return {
        "impl": label,
        "batch": batch,
        "layers_stacked": n,
        "graph_s_per_layer": graph and graph / n,
        "eager_s_per_layer": eager["median_s"] / n,
        "kernels_per_layer": prof["kernels"] / n,
        "kernel_us_per_layer": prof["total_us"] / n,
        "by_category_per_layer": per_cat,
        "state_bytes_per_layer": step.state_bytes() / n,
        "state_dtype": step.state_dtype(),
        "finite": finite,
        "layer0_kernels": [
            (k["name"][:80], k["cat"], round(k["us"], 2)) for k in kernels[: len(kernels) // n]
        ],
    }


def run(torch: Any, models: list[str], *, budget_s: float, log: Any) -> list[dict[str, Any]]:
    """Every model x impl x batch within budget_s."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

    start, rows = time.perf_counter(), []
    resolved = mq.torch_recurrent_gated_delta_rule
    reference = resolved
    while hasattr(reference, "__wrapped__"):
        reference = reference.__wrapped__
    for model_id in models:
        card = load_card(model_id)
        config, layers = build_stack(torch, card)
        for label, fn in (("resolved", resolved), ("torch_recurrent", reference)):
            mq.torch_recurrent_gated_delta_rule = fn
            for batch in BATCHES:
                if time.perf_counter() - start > budget_s:
                    mq.torch_recurrent_gated_delta_rule = resolved
                    return rows
                try:
                    row = measure(torch, config, layers, batch, label)
                except torch.OutOfMemoryError:
                    continue
                rows.append({"model": model_id, **row})
                g = row["graph_s_per_layer"]
                log(
                    f"  [gdn] {model_id} {label} b={batch:4d} "
                    f"graph={g * 1e6 if g else float('nan'):8.1f} us/layer "
                    f"eager={row['eager_s_per_layer'] * 1e6:8.1f} us kernels={row['kernels_per_layer']:.1f}"
                )
        mq.torch_recurrent_gated_delta_rule = resolved
        del layers
        torch.cuda.empty_cache()
    return rows
