"""Worked cases for vLLM / vllm-ascend KV-pool sizing (see docs/engines/vllm-memory.md).

Stdlib only; no planner imports, so the numbers are an independent check of the
implementation. Each function is one step of the engine's own arithmetic, cited in
vllm-memory.md by file and line of:
  vLLM 0.27.1 (PyPI sdist, commit 6e448d0ea)  and
  vllm-ascend main 182b75ea84ff (2026-08-22), which pins vLLM v0.27.1.

Run:   python3 docs/engines/worked_cases.py            (prints a table)
       python3 docs/engines/worked_cases.py --write    (also rewrites
                                     tests/golden/engines/vllm_cases.json; refuses to
                                     overwrite without --force)
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

GIB = 2**30
BF16, FP32 = 2, 4

# ---------------------------------------------------------------- model geometry


@dataclass(frozen=True)
class Hybrid:
    """Qwen3.5 / Qwen3-Next style: full attention + Gated DeltaNet layers."""

    n_attn_layers: int
    n_gdn_layers: int
    num_kv_heads: int
    head_dim: int
    lin_k_heads: int
    lin_v_heads: int
    lin_k_dim: int
    lin_v_dim: int
    conv_kernel: int
    ssm_dtype_bytes: int  # mamba_ssm_dtype (float32 for Qwen3.5)
    mtp_layers: int  # full-attention layers the MTP drafter adds (mtp_num_hidden_layers)


QWEN35_27B = Hybrid(16, 48, 4, 256, 16, 48, 128, 128, 4, FP32, 1)


def attn_bytes_per_token(num_kv_heads: int, head_dim: int, tp: int, kv_bytes: int) -> int:
    """K+V bytes of one token in one attention layer on one rank (FullAttentionSpec, block_size=1)."""
    heads = max(1, num_kv_heads // tp)
    return 2 * heads * head_dim * kv_bytes


def gdn_conv_bytes(m: Hybrid, tp: int, num_spec: int, conv_bytes: int = BF16) -> int:
    """Conv state: (conv_kernel - 1 + num_spec) x conv_dim/tp, activation dtype."""
    conv_dim = m.lin_k_dim * m.lin_k_heads * 2 + m.lin_v_dim * m.lin_v_heads
    return (m.conv_kernel - 1 + num_spec) * (conv_dim // tp) * conv_bytes


def gdn_ssm_bytes(m: Hybrid, tp: int) -> int:
    """Recurrent (temporal) state: (v_heads/tp) x v_dim x k_dim in mamba_ssm_dtype."""
    return (m.lin_v_heads // tp) * m.lin_v_dim * m.lin_k_dim * m.ssm_dtype_bytes


# ---------------------------------------------------------------- block size + page


def cuda_block_and_page(m: Hybrid, tp: int, kv_bytes: int, num_spec: int) -> tuple[int, int]:
    """vLLM Platform._align_hybrid_block_size (mamba_cache_mode none/align), FLASH_ATTN MultipleOf(16)."""
    tok = attn_bytes_per_token(m.num_kv_heads, m.head_dim, tp, kv_bytes)
    mamba_page = gdn_conv_bytes(m, tp, num_spec) + gdn_ssm_bytes(m, tp)
    align = max(16, 16)  # max(min kernel block size, cache_config.block_size default 16)
    block = align * math.ceil(mamba_page / (align * tok))
    return block, block * tok  # mamba page padded up to the attention page


def ascend_block_and_page(m: Hybrid, tp: int, kv_bytes: int, num_spec: int) -> tuple[int, int]:
    """vllm-ascend patch_mamba_config.verify_and_update_config (K-only derivation, HEAD 182b75ea)."""
    tok = attn_bytes_per_token(m.num_kv_heads, m.head_dim, tp, kv_bytes)
    k_tok = tok // 2
    ssm = gdn_ssm_bytes(m, tp)
    block = 128 * math.ceil(ssm / (128 * k_tok))
    assert k_tok * block == ssm, "vllm-ascend asserts an exact K-page/ssm match"
    page = block * tok + gdn_conv_bytes(m, tp, num_spec)  # mamba_page_size_padded; attn padded to it
    return block, page


def ascend_fixed_block_and_page(m: Hybrid, tp: int, kv_bytes: int, num_spec: int) -> tuple[int, int]:
    """vllm-ascend PR #14543 / #16261 (open): block derived from the K+V page."""
    tok = attn_bytes_per_token(m.num_kv_heads, m.head_dim, tp, kv_bytes)
    ssm = gdn_ssm_bytes(m, tp)
    block = 128 * math.ceil(ssm / (128 * tok))
    return block, block * tok + gdn_conv_bytes(m, tp, num_spec)


# ---------------------------------------------------------------- groups and pool


def group_size(layer_counts: list[int]) -> int:
    """_get_kv_cache_groups_uniform_page_size: min count, or max if max < 1.5 x min."""
    lo, hi = min(layer_counts), max(layer_counts)
    return hi if hi < lo * 1.5 else lo


def num_blocks(available_bytes: int, page_bytes: int, layers_per_group: int) -> int:
    """get_num_blocks: available // page_size // num_layers (group_size tensors share the pool)."""
    return int(available_bytes // page_bytes // layers_per_group)


def blocks_per_request(
    attn_groups: int, gdn_groups: int, max_len: int, block: int, mamba_mode: str, num_spec: int
) -> int:
    """get_max_concurrency_for_kv_cache_config: sum over groups of cdiv(max_memory_usage, page)."""
    per_attn = math.ceil(max_len / block)  # FullAttentionSpec.max_memory_usage_bytes / page
    per_gdn = (2 if mamba_mode == "align" else 1) + num_spec  # MambaSpec.max_memory_usage_bytes / page
    return attn_groups * per_attn + gdn_groups * per_gdn


def hybrid_case(
    engine: str,
    m: Hybrid,
    *,
    tp: int,
    kv_bytes: int,
    max_len: int,
    available_bytes: int,
    prefix_caching: bool,
    num_spec: int,
) -> dict[str, Any]:
    """Blocks, tokens and concurrency that vLLM logs for one hybrid deployment."""
    pick = {
        "cuda": cuda_block_and_page,
        "ascend": ascend_block_and_page,
        "ascend-pr14543": ascend_fixed_block_and_page,
    }[engine]
    block, page = pick(m, tp, kv_bytes, num_spec)
    n_attn = m.n_attn_layers + (m.mtp_layers if num_spec else 0)
    g = group_size([n_attn, m.n_gdn_layers])
    attn_groups, gdn_groups = math.ceil(n_attn / g), math.ceil(m.n_gdn_layers / g)
    nb = num_blocks(available_bytes, page, g)
    mode = "align" if prefix_caching else "none"
    per_req = blocks_per_request(attn_groups, gdn_groups, max_len, block, mode, num_spec)
    conc = nb / per_req
    return {
        "block_size_tokens": block,
        "page_bytes": page,
        "layers_per_group": g,
        "attention_groups": attn_groups,
        "state_groups": gdn_groups,
        "num_blocks": nb,
        "blocks_per_request": per_req,
        "max_concurrency": conc,
        "kv_cache_size_tokens": int(conc * max_len),
        "mamba_cache_mode": mode,
    }


def dense_case(
    *, n_layers: int, bytes_per_token_layer: int, block: int, max_len: int, available_bytes: int
) -> dict[str, Any]:
    """One group of all layers (uniform spec): blocks = avail // page // layers."""
    page = block * bytes_per_token_layer
    nb = num_blocks(available_bytes, page, n_layers)
    per_req = math.ceil(max_len / block)
    conc = nb / per_req
    return {
        "block_size_tokens": block,
        "page_bytes": page,
        "layers_per_group": n_layers,
        "num_blocks": nb,
        "blocks_per_request": per_req,
        "max_concurrency": conc,
        "kv_cache_size_tokens": int(conc * max_len),
    }


# How each engine rounds total x gpu_memory_utilization (vllm_available_bytes).
ROUNDING = {"cuda": "ceil", "ascend": "floor"}


def vllm_available_bytes(
    engine: str, total_bytes: int, util: float, weights: int, activation: int, non_torch: int, graph: int = 0
) -> int:
    """available = requested - weights - peak activation - non-torch - graph.

    requested: vLLM (cuda) returns ceil(total x util) from request_memory (v1/worker/utils.py:414);
    vllm-ascend keeps total x util a float ([VA] worker/worker.py:425) and returns
    int(requested - non_kv) (worker.py:547, 577), i.e. floor(total x util) - non_kv.
    """
    product = total_bytes * util
    requested = math.ceil(product) if engine == "cuda" else math.floor(product)
    return requested - weights - activation - non_torch - graph


def min_gpu_memory_utilization(
    total_bytes: int,
    non_kv_bytes: int,
    n_seqs: int,
    per_req_blocks: int,
    page_bytes: int,
    layers_per_group: int,
) -> float:
    """Smallest util holding n_seqs full-length requests: (non-KV + N x blocks x page x g) / total."""
    need = non_kv_bytes + n_seqs * per_req_blocks * page_bytes * layers_per_group
    return need / total_bytes


# ---------------------------------------------------------------- the cases

VLLM_SRC = "vllm 0.27.1 (PyPI sdist vllm-0.27.1.tar.gz, _version commit g6e448d0ea)"
VA_SRC = (
    "vllm-project/vllm-ascend@182b75ea84ff13ece27b57391331ef8935410aea (pins VLLM_TAG=v0.27.1, Dockerfile:54)"
)
CITATIONS = {
    "common": [
        "vllm/v1/core/kv_cache_utils.py:937-959 get_max_concurrency_for_kv_cache_config",
        "vllm/v1/core/kv_cache_utils.py:993-1010 get_num_blocks",
        "vllm/v1/core/kv_cache_utils.py:1140-1280 _get_kv_cache_groups_uniform_page_size",
        "vllm/v1/core/kv_cache_utils.py:1361-1435 get_kv_cache_config_from_groups",
        "vllm/v1/core/kv_cache_utils.py:2213-2240 log lines",
        "vllm/v1/kv_cache_interface.py:266-271 FullAttentionSpec.max_memory_usage_bytes",
        "vllm/v1/kv_cache_interface.py:710-738 MambaSpec",
    ],
    "cuda": [
        "vllm/platforms/interface.py:765-937 _align_hybrid_block_size",
        "vllm/v1/attention/backends/flash_attn.py:84 MultipleOf(16)",
        "vllm/model_executor/layers/mamba/mamba_utils.py:247-268 gated_delta_net_state_shape",
        "vllm/v1/worker/gpu_worker.py:500-548 determine_available_memory",
    ],
    "ascend": [
        "vllm-ascend vllm_ascend/patch/platform/patch_mamba_config.py:58-144",
        "vllm-ascend vllm_ascend/worker/model_runner_v1.py:4775-4784 attention page padded",
        "vllm-ascend vllm_ascend/utils.py:1162-1212 refresh_block_size",
        "vllm-ascend vllm_ascend/worker/worker.py:514-547 determine_available_memory",
    ],
    "ascend-pr14543": ["vllm-ascend PR #14543 / #16261 (open): block from the K+V page"],
}
CAP_950PR = 128 * GIB  # hwprofiles/ascend-950pr.yaml memory_capacity_gib: 128
CAP_910B3 = 64 * GIB  # hwprofiles/ascend-910b3.yaml memory_capacity_gib: 64
RUNTIME = 3 * GIB  # hwprofiles runtime_overhead_gib: 3.0 (assumed, NF), used as non-torch memory

# The issue's figures: "available KV memory" = kvplan's own budget for `kvplan vllm`
# (0.8 x capacity - weights - activation at 24 576 batched tokens - 3 GiB), from
# `kvplan --model qwen3.5-27b --ctx 32k --dtype fp8 --tp 2 --max-prefill-tokens 24576 --mtp {0,1} --json`.
Q35_W = 14_730_513_920  # weights per rank, fp8, tp 2 (kvplan, exact shapes)
Q35_W_MTP = 14_969_266_688  # + MTP layer
Q35_ACT_24K = 1_786_773_504  # kvplan activation model, 24 576 tokens (assumed)
Q35_ACT_8K = 595_591_168  # kvplan activation model, 8 192 tokens (assumed)
ISSUE_AVAIL = int(0.8 * CAP_950PR) - Q35_W - Q35_ACT_24K - RUNTIME  # 90 212 649 881
ISSUE_AVAIL_MTP = int(0.8 * CAP_950PR) - Q35_W_MTP - Q35_ACT_24K - RUNTIME  # 89 973 897 113


def q35_tp2_case(engine: str, avail: int, *, prefix_caching: bool, num_spec: int) -> dict[str, Any]:
    """The Qwen3.5-27B tp 2, 32k, bf16-KV case every 950PR variant below shares."""
    return hybrid_case(
        engine,
        QWEN35_27B,
        tp=2,
        kv_bytes=BF16,
        max_len=32768,
        available_bytes=avail,
        prefix_caching=prefix_caching,
        num_spec=num_spec,
    )


def qwen35_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    base = {
        "model": "qwen3.5-27b",
        "card": "ascend-950pr",
        "tp": 2,
        "ctx_tokens": 32768,
        "weights_dtype": "fp8",
        "kv_dtype": "bf16",
    }
    variants = [
        ("ascend", False, 0, ISSUE_AVAIL, 71.00),
        ("ascend", True, 0, ISSUE_AVAIL, 63.4),
        ("ascend", False, 1, ISSUE_AVAIL_MTP, 59.5),
        ("ascend", False, 3, ISSUE_AVAIL_MTP, 48.7),
        ("ascend", False, 1, ISSUE_AVAIL, 59.5),
        ("ascend", False, 3, ISSUE_AVAIL, 48.7),
        ("ascend-pr14543", False, 0, ISSUE_AVAIL, None),
        ("cuda", False, 0, ISSUE_AVAIL, 78.02),
        ("cuda", True, 0, ISSUE_AVAIL, None),
        ("cuda", False, 1, ISSUE_AVAIL_MTP, None),
        ("cuda", False, 3, ISSUE_AVAIL_MTP, None),
    ]
    for engine, pc, spec, avail, issue_fig in variants:
        out = q35_tp2_case(engine, avail, prefix_caching=pc, num_spec=spec)
        src = "issue-budget" if avail == ISSUE_AVAIL else "issue-budget-with-mtp-weights"
        digits = 2 if issue_fig in (71.00, 78.02) else 1  # the issue prints 71.00x, 63.4x, ...
        out["matches_issue_figure"] = (
            None if issue_fig is None else f"{out['max_concurrency']:.{digits}f}" == f"{issue_fig:.{digits}f}"
        )
        cases.append(
            {
                "id": f"qwen3.5-27b-tp2-950pr-32k-{engine}-pc{int(pc)}-mtp{spec}-{src}",
                "engine": engine,
                "inputs": {
                    **base,
                    "prefix_caching": pc,
                    "num_speculative_tokens": spec,
                    "available_kv_bytes": avail,
                    "available_kv_source": src,
                },
                "expected": out,
                "issue_figure": issue_fig,
                "citation": CITATIONS["common"] + CITATIONS[engine],
            }
        )
    # What vLLM itself would find with its defaults (util 0.92, 8192 batched tokens).
    for engine in ("ascend", "cuda"):
        avail = vllm_available_bytes(engine, CAP_950PR, 0.92, Q35_W, Q35_ACT_8K, RUNTIME)
        out = q35_tp2_case(engine, avail, prefix_caching=False, num_spec=0)
        out["min_gpu_memory_utilization_for_78_seqs"] = min_gpu_memory_utilization(
            CAP_950PR,
            Q35_W + Q35_ACT_8K + RUNTIME,
            78,
            int(out["blocks_per_request"]),
            int(out["page_bytes"]),
            int(out["layers_per_group"]),
        )
        cases.append(
            {
                "id": f"qwen3.5-27b-tp2-950pr-32k-{engine}-util092",
                "engine": engine,
                "inputs": {
                    **base,
                    "prefix_caching": False,
                    "num_speculative_tokens": 0,
                    "available_kv_bytes": avail,
                    "available_kv_source": f"vllm-default: {ROUNDING[engine]}(0.92 x 128 GiB) - weights"
                    " - act(8192 tok) - 3 GiB (graph memory not subtracted)",
                },
                "expected": out,
                "issue_figure": None,
                "citation": CITATIONS["common"] + CITATIONS[engine],
            }
        )
    return cases


def dense_and_mla_cases() -> list[dict[str, Any]]:
    # (id, model, tp, weights dtype, weight bytes, activation bytes at 8192 tokens (kvplan), layers,
    #  KV bytes per token per layer)
    specs = [
        (
            "qwen3-32b-tp2-910b3-32k-ascend-util092",
            "qwen3-32b",
            2,
            "bf16",
            32_762_800_128,
            796_917_760,
            64,
            attn_bytes_per_token(8, 128, 2, BF16),
        ),
        (
            "deepseek-v3-tp16-910b3-32k-ascend-mla-util092",
            "deepseek-v3",
            16,
            "int8",
            44_466_628_352,
            1_224_736_768,
            61,
            (512 + 64) * BF16,
        ),
    ]
    cases: list[dict[str, Any]] = []
    for case_id, model, tp, weights_dtype, weights, act, layers, per_layer in specs:
        avail = vllm_available_bytes("ascend", CAP_910B3, 0.92, weights, act, RUNTIME)
        out = dense_case(
            n_layers=layers, bytes_per_token_layer=per_layer, block=128, max_len=32768, available_bytes=avail
        )
        cases.append(
            {
                "id": case_id,
                "engine": "ascend",
                "inputs": {
                    "model": model,
                    "card": "ascend-910b3",
                    "tp": tp,
                    "ctx_tokens": 32768,
                    "weights_dtype": weights_dtype,
                    "kv_dtype": "bf16",
                    "available_kv_bytes": avail,
                    "available_kv_source": "floor(0.92 x 64 GiB) - weights"
                    " - act(8192 tok, kvplan model) - 3 GiB",
                },
                "expected": out,
                "issue_figure": None,
                "citation": CITATIONS["common"]
                + CITATIONS["ascend"][2:]
                + [
                    "vllm-ascend vllm_ascend/core/kv_cache_interface.py:55-61"
                    " AscendMLAAttentionSpec.page_size_bytes"
                ],
            }
        )
    return cases


def write_atomic(path: str, text: str, force: bool) -> None:
    if os.path.exists(path) and not force:
        raise SystemExit(f"{path} exists: pass --force to overwrite")
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv: list[str]) -> None:
    cases = qwen35_cases() + dense_and_mla_cases()
    for c in cases:
        e = c["expected"]
        fig = "" if c["issue_figure"] is None else f"  (issue: {c['issue_figure']})"
        print(
            f"{c['id']:<78} block {e['block_size_tokens']:>5} page {e['page_bytes']:>9} "
            f"g {e['layers_per_group']:>2} blocks {e['num_blocks']:>6} "
            f"per-req {e['blocks_per_request']:>3} "
            f"tokens {e['kv_cache_size_tokens']:>9,} conc {e['max_concurrency']:.2f}x{fig}"
        )
    if "--write" in argv:
        doc = {
            "about": "vLLM / vllm-ascend KV-pool sizing goldens; formulas and citations in "
            "docs/engines/vllm-memory.md; generated by docs/engines/worked_cases.py",
            "sources": {"vllm": VLLM_SRC, "vllm_ascend": VA_SRC},
            "cases": cases,
        }
        here = os.path.dirname(os.path.abspath(__file__))
        out = os.path.join(here, "..", "..", "tests", "golden", "engines", "vllm_cases.json")
        write_atomic(os.path.normpath(out), json.dumps(doc, indent=1) + "\n", "--force" in argv)


if __name__ == "__main__":
    main(sys.argv[1:])
