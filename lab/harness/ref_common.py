"""Shared pieces of the run-5 reference harnesses (lab/harness/ref_*.py): model cards, HF configs, timing.

Self-contained on purpose (no planner import): model geometry is read from modelcards/*.yaml with yaml, the
transformers config is built from it, and every timing goes through CUDA events around graph replays.
torch is imported lazily so the module imports on a machine without torch.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

ROOT = Path(__file__).resolve().parents[2]
ATTN_NAME = "kvplan_ref_sdpa"
# --backend name -> torch.nn.attention.SDPBackend member ("default": torch's own dispatch).
SDPA_BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}
BACKENDS = ("default", *SDPA_BACKENDS)


def load_card(model_id: str) -> dict[str, Any]:
    """The model card modelcards/<id>.yaml as a plain dict."""
    import yaml

    with open(ROOT / "modelcards" / f"{model_id}.yaml", encoding="utf-8") as handle:
        return dict(yaml.safe_load(handle))


def is_hybrid(card: dict[str, Any]) -> bool:
    """True for Qwen3.5-style Gated DeltaNet + full attention cards."""
    return str(card.get("model_type", "")).startswith("qwen3_5")


def hf_config(card: dict[str, Any]) -> Any:
    """A transformers config with exactly the card's geometry (dense Qwen3/Llama, Qwen3-MoE, Qwen3.5 text)."""
    from transformers import AutoConfig

    keys = [
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "max_position_embeddings",
        "tie_word_embeddings",
    ]
    fields = {k: card[k] for k in keys if card.get(k) is not None}
    fields["attention_bias"] = bool(card.get("attention_bias", False))
    if card.get("num_experts"):  # Qwen3-MoE: every layer routed (grouped GEMM experts)
        fields.update({k: card[k] for k in ("num_experts", "num_experts_per_tok", "moe_intermediate_size")})
        fields.update(decoder_sparse_step=1, mlp_only_layers=[])
    if is_hybrid(card):
        for k in [
            "linear_conv_kernel_dim",
            "linear_key_head_dim",
            "linear_value_head_dim",
            "linear_num_key_heads",
            "linear_num_value_heads",
        ]:
            fields[k] = card[k]
        fields["full_attention_interval"] = card.get("full_attention_interval", 4)
        fields["rope_parameters"] = {
            "rope_type": "default",
            "rope_theta": 10_000_000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": [11, 11, 10],
            "mrope_interleaved": True,
        }
    return AutoConfig.for_model(card["model_type"], **fields)


def sdpa_context(backend: str) -> Any:
    """A context manager restricting SDPA to one backend ("default": no restriction)."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    if backend == "default":
        return contextlib.nullcontext()
    return sdpa_kernel([getattr(SDPBackend, SDPA_BACKENDS[backend])])


def register_attention(torch: Any, backend: str, *, name: str = ATTN_NAME, label: str | None = None) -> None:
    """Register GQA SDPA (enable_gqa=True, no mask: the cache is exactly ctx long) under `name`.

    backend "default" leaves the choice to torch's own dispatch; others force one SDPA backend. With
    `label`, each call runs inside torch.profiler.record_function(label) (lab/harness/kernel_counts.py
    attributes its kernels to attention); host-side only, nothing changes on the device.
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    sdpa = torch.nn.functional.scaled_dot_product_attention

    def attend(
        module: Any, query: Any, key: Any, value: Any, *_mask: Any, scaling: Any = None, **_: Any
    ) -> Any:
        causal = query.shape[2] > 1
        with sdpa_context(backend):
            out = sdpa(query, key, value, scale=scaling, is_causal=causal, enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None

    def labelled(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(label):
            return attend(*args, **kwargs)

    AttentionInterface.register(name, labelled if label else attend)
    AttentionMaskInterface.register(name, lambda *args, **kwargs: None)


class DecodeStep:
    """Static decode inputs for one (batch, ctx) on `device` and the model call a graph captures."""

    def __init__(self, torch: Any, model: Any, cache: Any, *, batch: int, ctx: int, device: Any) -> None:
        self.model, self.cache = model, cache
        self.ids = torch.randint(0, model.config.vocab_size, (batch, 1), device=device)
        self.pos = torch.full((batch, 1), ctx - 1, device=device, dtype=torch.long)
        self.cache_position = torch.tensor([ctx - 1], device=device, dtype=torch.long)

    def forward(self) -> Any:
        """One decode step in place (the cache advances): the logits of the last position."""
        out = self.model(
            input_ids=self.ids,
            position_ids=self.pos,
            cache_position=self.cache_position,
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits


def build_model(torch: Any, card: dict[str, Any], *, attn: str = ATTN_NAME, seed: int = 0) -> Any:
    """transformers' causal LM from the card, bf16 on cuda, weights drawn N(0, 0.02) (never left empty)."""
    from transformers import AutoModelForCausalLM

    config = hf_config(card)
    config._attn_implementation = attn
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation=attn)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("A_log"):
                param.uniform_(0.0, 2.7, generator=gen)  # A in [1, 15]: the HF init range
            elif name.endswith("dt_bias") or "norm" in name.split(".")[-2:][0]:
                param.fill_(1.0)
            else:
                param.normal_(0.0, 0.02, generator=gen)
    return model.eval()


def gqa_groups(card: dict[str, Any]) -> int:
    """Query heads per KV head."""
    return int(card["num_attention_heads"]) // int(card["num_key_value_heads"])


def device_time(torch: Any, fn: Any, *, min_s: float = 0.02, max_reps: int = 200) -> dict[str, float]:
    """Median seconds per fn() over event-timed repeats (fn warmed up first); spread = (max-min)/median."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t0, 1e-6)
    reps = int(min(max_reps, max(5, min_s / one)))
    samples = []
    for _ in range(reps):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(begin.elapsed_time(end) / 1e3)
    med = statistics.median(samples)
    return {
        "median_s": med,
        "min_s": min(samples),
        "spread": (max(samples) - min(samples)) / med,
        "reps": reps,
    }


def graph_of(torch: Any, fn: Any, *, warm: int = 3) -> Any:
    """Capture fn into a CUDA graph after warm-ups on a side stream; returns graph.replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay


def free_bytes(torch: Any) -> int:
    """Free device memory after returning cached blocks."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return int(torch.cuda.mem_get_info()[0])


def versions(torch: Any) -> dict[str, Any]:
    """torch / CUDA / transformers / fla / triton versions and the device name."""
    out: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0),
        "cudnn": torch.backends.cudnn.version(),
    }
    for name in ("transformers", "fla", "triton"):
        try:
            out[name] = __import__(name).__version__
        except Exception as exc:
            out[name] = f"absent ({type(exc).__name__})"
    return out


def kernel_category(name: str) -> str:
    """Coarse class of a CUDA kernel name: gemm, attention, gdn, conv, norm_elementwise, copy, other."""
    low = name.lower()
    if any(s in low for s in ("gemm", "nvjet", "cutlass", "sm90_xmma", "cublas", "gemv", "splitk")):
        return "gemm"
    if any(s in low for s in ("flash", "fmha", "attention", "cudnn", "sdpa", "mem_eff")):
        return "attention"
    if any(
        s in low
        for s in (
            "gated_delta",
            "delta_rule",
            "chunk_",
            "recurrent",
            "l2norm",
            "cumsum",
            "solve_tril",
            "wy_fast",
            "recompute_w_u",
            "chunk_local",
        )
    ):
        return "gdn"
    if "conv" in low:
        return "conv"
    if any(s in low for s in ("copy", "memcpy", "memset", "cat", "index")):
        return "copy"
    if any(
        s in low
        for s in (
            "elementwise",
            "reduce",
            "norm",
            "vectorized",
            "softmax",
            "silu",
            "mul",
            "add",
            "rsqrt",
            "pow",
            "mean",
            "sigmoid",
            "softplus",
            "exp",
            "triton",
        )
    ):
        return "norm_elementwise"
    return "other"


def profile_kernels(torch: Any, fn: Any) -> list[dict[str, Any]]:
    """Every CUDA kernel of one fn() call: name, category, device microseconds (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        fn()
        torch.cuda.synchronize()
    rows = []
    for evt in prof.events():
        if getattr(evt, "device_type", None) is not None and str(evt.device_type).endswith("CUDA"):
            us = float(getattr(evt, "device_time", 0.0) or getattr(evt, "cuda_time", 0.0) or 0.0)
            rows.append({"name": evt.name[:120], "cat": kernel_category(evt.name), "us": us})
    return rows


def summarise_kernels(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Kernel count and device microseconds per category."""
    out: dict[str, Any] = {"kernels": len(rows), "total_us": sum(r["us"] for r in rows), "by_cat": {}}
    for r in rows:
        cat = out["by_cat"].setdefault(r["cat"], {"n": 0, "us": 0.0})
        cat["n"] += 1
        cat["us"] += r["us"]
    return out
