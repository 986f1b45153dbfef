"""The fake's torch_npu operators, computed on CPU with plain torch. Keyword names follow the torch_npu 7.x
API documentation (an unknown keyword raises TypeError); shapes and dtypes are checked where the documentation
states a rule, so a wrong call fails here as it would on a device."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from typing import Any, TypeVar, cast

import torch

Op = TypeVar("Op", bound=Callable[..., Any])
ND, FRACTAL_NZ = 2, 29  # ACL format ids [assumed from torch_npu's npu_format_cast documentation]


def _soc() -> str:
    return os.environ.get("FAKE_NPU_SOC", "Ascend910B4")


def _reject_bf16(*tensors: Any) -> None:
    if _soc().startswith("Ascend310P") and any(t.dtype == torch.bfloat16 for t in tensors):
        raise RuntimeError(f"fake torch_npu: {_soc()} does not support bfloat16")


def _oom(kv_bytes: int) -> None:
    limit = os.environ.get("FAKE_NPU_OOM_BYTES")
    if limit is not None and kv_bytes > int(limit):
        raise RuntimeError(
            f"NPU out of memory. Tried to allocate {kv_bytes / 2**30:.2f} GiB (fake limit {limit} B)"
        )


def _documented(unused: str, *, positional: bool = False) -> Callable[[Op], Op]:
    """A fake op that also accepts the documented arguments named in `unused` (space separated, in the
    documented order) and does not compute with: as keywords, and with `positional` also as positional
    arguments after the op's own. Any other keyword, an extra positional argument or one given twice raises
    TypeError, as the binding does."""
    names = unused.split()

    def wrap(op: Op) -> Op:
        own = op.__code__.co_argcount  # the op's own positional parameters
        most = own + len(names) if positional else own

        @functools.wraps(op)
        def call(*args: Any, **kwargs: Any) -> Any:
            twice = set(names[: max(0, len(args) - own)]) & kwargs.keys()
            if len(args) > most or twice:
                raise TypeError(
                    f"{op.__name__}() got {len(args)} positional arguments (at most {most});"
                    f" given twice: {sorted(twice)}"
                )
            return op(*args[:own], **{k: v for k, v in kwargs.items() if k not in names})

        return cast(Op, call)

    return wrap


def _paged_kv(cache: Any, block_table: Any, *, heads: int, layout: str) -> Any:
    """(B, S_max, heads, D) from a paged cache: BSH (blocks, block_size, heads*D) or BNSD (blocks, heads,
    block_size, D), gathered through block_table (B, max_blocks)."""
    if block_table.dtype != torch.int32:
        raise RuntimeError("fake torch_npu: block_table must be int32")
    blocks = cache[block_table.long()]  # (B, nb, ...)
    if layout == "BSH":
        batch, nb, bs, hidden = blocks.shape
        return blocks.reshape(batch, nb * bs, heads, hidden // heads)
    batch, nb, n, bs, d = blocks.shape
    return blocks.permute(0, 1, 3, 2, 4).reshape(batch, nb * bs, n, d)


def _dense_kv(t: Any, *, heads: int, layout: str) -> Any:
    if layout == "BSH":
        batch, s, hidden = t.shape
        return t.reshape(batch, s, heads, hidden // heads)
    return t.transpose(1, 2)


@_documented(
    "pse_shift atten_mask actual_seq_lengths dequant_scale1 quant_scale1 dequant_scale2 quant_scale2"
    " quant_offset2 antiquant_scale antiquant_offset query_padding_size kv_padding_size"
    " key_antiquant_scale key_antiquant_offset value_antiquant_scale value_antiquant_offset"
    " key_shared_prefix value_shared_prefix actual_shared_prefix_len query_rope key_rope"
    " key_rope_antiquant_scale pre_tokens next_tokens sparse_mode inner_precise antiquant_mode"
    " softmax_lse_flag key_antiquant_mode value_antiquant_mode"
)
def npu_fused_infer_attention_score(
    query: Any,
    key: Any,
    value: Any,
    *,
    actual_seq_lengths_kv: Any = None,
    block_table: Any = None,
    num_heads: int = 1,
    scale: float = 1.0,
    input_layout: str = "BSH",
    num_key_value_heads: int = 0,
    block_size: int = 0,
) -> tuple[Any, Any]:
    """Attention of `query` over a dense or paged KV cache; returns (output in query's layout, lse)."""
    _reject_bf16(query, key, value)
    if input_layout not in ("BSH", "BNSD"):
        raise RuntimeError(f"fake torch_npu: input_layout {input_layout} not supported by the fake")
    kv_heads = num_key_value_heads or num_heads
    _oom(key.numel() * key.element_size() * 2)
    if block_table is not None:
        if block_size <= 0 or block_size % 16:
            raise RuntimeError(
                f"fake torch_npu: block_size must be a positive multiple of 16 (got {block_size})"
            )
        k = _paged_kv(key, block_table, heads=kv_heads, layout=input_layout)
        v = _paged_kv(value, block_table, heads=kv_heads, layout=input_layout)
    else:
        k = _dense_kv(key, heads=kv_heads, layout=input_layout)
        v = _dense_kv(value, heads=kv_heads, layout=input_layout)
    q = _dense_kv(query, heads=num_heads, layout=input_layout)  # (B, S_q, Hq, D)
    if actual_seq_lengths_kv is not None:
        length = max(int(n) for n in actual_seq_lengths_kv)
        k, v = k[:, :length], v[:, :length]
    group = num_heads // kv_heads
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * scale
    out = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v.float()).to(query.dtype)
    lse = torch.logsumexp(scores, dim=-1)
    if input_layout == "BSH":
        return out.reshape(query.shape), lse
    return out.transpose(1, 2), lse


@_documented(
    "bias scale offset antiquant_scale antiquant_offset per_token_scale activation_input"
    " activation_quant_scale activation_quant_offset act_type output_dtype tuning_config"
)
def npu_grouped_matmul(
    x: list[Any],
    weight: list[Any],
    *,
    group_list: Any = None,
    split_item: int = 0,
    group_type: int | None = None,
    group_list_type: int = 0,
) -> list[Any]:
    """One x (M, K) split by group_list over one stacked weight (E, K, N): y = x_g @ W_g per group."""
    if len(x) != 1 or len(weight) != 1 or group_type != 0 or split_item not in (2, 3):
        raise RuntimeError(
            "fake torch_npu: only x=[one tensor], weight=[(E, K, N)], group_type=0, split_item 2/3"
        )
    rows, w = x[0], weight[0]
    _reject_bf16(rows, w)
    if w.dim() != 3 or rows.shape[-1] != w.shape[1]:
        raise RuntimeError(f"fake torch_npu: x {tuple(rows.shape)} does not match weight {tuple(w.shape)}")
    if group_list is None or group_list.dtype != torch.int64:
        raise RuntimeError("fake torch_npu: group_list must be an int64 tensor")
    ends = group_list if group_list_type == 0 else torch.cumsum(group_list, 0)
    expert = torch.searchsorted(ends, torch.arange(rows.shape[0]), right=True).clamp(max=w.shape[0] - 1)
    return [torch.bmm(rows.unsqueeze(1), w[expert]).squeeze(1)]


@_documented(
    "antiquant_offset quant_scale quant_offset bias antiquant_group_size inner_precise", positional=True
)
def npu_weight_quant_batchmatmul(x: Any, weight: Any, antiquant_scale: Any) -> Any:
    """W8A16: x (M, K) fp16/bf16 times int8 weight (K, N) dequantized with a per-channel scale (N,)."""
    _reject_bf16(x, antiquant_scale)
    if weight.dtype != torch.int8 or weight.dim() != 2 or x.shape[-1] != weight.shape[0]:
        raise RuntimeError(
            f"fake torch_npu: weight must be int8 (K, N) with K = x's last dim (x {tuple(x.shape)}, "
            f"weight {tuple(weight.shape)} {weight.dtype})"
        )
    if antiquant_scale.shape[-1] != weight.shape[1]:
        raise RuntimeError("fake torch_npu: antiquant_scale must have N elements")
    return x @ (weight.to(x.dtype) * antiquant_scale.to(x.dtype))


@_documented("offset pertoken_scale bias")
def npu_quant_matmul(x1: Any, x2: Any, scale: Any, *, output_dtype: Any = None) -> Any:
    """int8 (all SoCs) or fp8 (950 only) x1 (M, K) @ x2 (K, N), dequantized by scale."""
    fp8 = {getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)}
    if x1.dtype in fp8 and not _soc().startswith("Ascend950"):
        raise RuntimeError(f"fake torch_npu: float8 inputs need an Ascend 950 (this is {_soc()})")
    if x1.dtype not in fp8 | {torch.int8} or x1.shape[-1] != x2.shape[0]:
        raise RuntimeError(
            f"fake torch_npu: x1 {x1.dtype} {tuple(x1.shape)} x2 {tuple(x2.shape)} not supported"
        )
    out = (x1.float() @ x2.float()) * scale.float()
    return out.to(output_dtype or torch.int8)


def npu_format_cast(tensor: Any, acl_format: int) -> Any:
    """A copy tagged with the ACL format (2 = ND, 29 = FRACTAL_NZ); data unchanged on the fake."""
    out = tensor.clone()
    out.fake_npu_format = acl_format
    return out


def get_npu_format(tensor: Any) -> int:
    return int(getattr(tensor, "fake_npu_format", ND))


def ceil_div(a: int, b: int) -> int:
    return math.ceil(a / b)
