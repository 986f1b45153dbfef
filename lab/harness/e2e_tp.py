"""End-to-end decode at tensor parallelism tp (torchrun, one process per GPU): transformers' modules, sharded.

Each rank builds transformers' model from a per-rank config (num_attention_heads, num_key_value_heads and
intermediate_size divided by tp, head_dim kept): that is exactly Megatron sharding of q/k/v and gate/up
(column-parallel) and o_proj and down (row-parallel). A forward hook on every o_proj and down_proj all-reduces
their output (torch.distributed, NCCL): two all-reduces per layer, as planner/opcost.py counts them. The
lm_head is vocabulary-parallel (vocab / tp rows per rank) and the step all-gathers the logits before the
argmax (one extra small collective per step, not in the planner). Weights are random, the StaticCache holds
the rank's KV heads, attention and timing follow lab/harness/e2e_decode.py (CUDA graph when capture works,
eager otherwise; the CSV's `graph` column says which). Rank 0 writes the rows (its host wall time per step).

Run: torchrun --nproc-per-node 2 -m lab.harness.e2e_tp --out DIR [--models ...] [--batches ...] [--ctx ...]
     [--device-kind cuda|npu|cpu] [--card CARD]   (npu: HCCL, never run on Ascend hardware)
"""

from __future__ import annotations

import argparse
import copy
import csv
import datetime as dt
import os
from pathlib import Path
from typing import Any

from calibration.allreduce import DIST_BACKEND
from calibration.device import Backend, open_backend
from lab.harness import e2e_decode as ref
from planner import catalog

REPLAYS = 30


def rank_config(card: Any, *, tp: int) -> Any:
    """The transformers config of one rank: heads, KV heads and MLP width divided by tp."""
    config = copy.deepcopy(ref.hf_config(card))
    config.num_attention_heads //= tp
    config.num_key_value_heads //= tp
    config.intermediate_size //= tp
    config._attn_implementation = ref.ATTN_NAME
    return config


def build_rank_model(bk: Backend, card: Any, *, tp: int) -> Any:
    """One rank's model: sharded attention and MLP, vocab-parallel lm_head, all-reduce hooks."""
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM

    torch = bk.torch
    with torch.device(bk.device):
        model = AutoModelForCausalLM.from_config(
            rank_config(card, tp=tp), dtype=torch.bfloat16, attn_implementation=ref.ATTN_NAME
        )
        model.lm_head = torch.nn.Linear(
            card.hidden_size, card.vocab_size // tp, bias=False, dtype=torch.bfloat16
        )

    def reduce(_module: Any, _inputs: Any, output: Any) -> Any:
        dist.all_reduce(output)
        return output

    for name, module in model.named_modules():
        if name.endswith(("self_attn.o_proj", "mlp.down_proj")):
            module.register_forward_hook(reduce)
    return model.eval()


class TPStepper(ref.Stepper):
    """The decode step with a vocabulary-parallel lm_head: all-gather the logits, then argmax."""

    def __init__(self, model: Any, cache: Any, *, batch: int, ctx: int, bk: Backend, tp: int) -> None:
        super().__init__(model, cache, batch=batch, ctx=ctx, bk=bk)
        self.gathered = bk.torch.empty(
            tp * batch, model.lm_head.out_features, device=bk.device, dtype=bk.torch.bfloat16
        )

    def __call__(self) -> None:
        import torch.distributed as dist

        dist.all_gather_into_tensor(self.gathered, self.forward()[:, -1, :].contiguous())
        batch = self.ids.shape[0]
        logits = self.gathered.view(-1, batch, self.gathered.shape[-1]).permute(1, 0, 2).reshape(batch, -1)
        self.ids.copy_(logits.argmax(-1, keepdim=True))


def time_fixed(bk: Backend, replay: Any) -> dict[str, Any]:
    """Host wall time per replay + sync over a fixed REPLAYS (every rank must issue the same collectives)."""
    import torch.distributed as dist

    for _ in range(3):
        replay()
    bk.synchronize()
    dist.barrier()
    return ref.timed_replays(bk, replay, count=REPLAYS)


def card_label(bk: Backend, card_id: str | None) -> str:
    """The hardware-profile id for the rows: --card, else the device's own name (never a fixed card)."""
    return card_id or bk.device_name().lower().replace(" ", "-")


def run_point(bk: Backend, model: Any, card: Any, *, batch: int, ctx: int, tp: int) -> dict[str, Any]:
    """One (batch, ctx) on this rank: cache of the rank's KV heads, capture (or eager), fixed-count timing."""
    config = model.config
    before = bk.memory_allocated()
    cache = ref.make_cache(config, batch=batch, ctx=ctx, bk=bk)
    step = TPStepper(model, cache, batch=batch, ctx=ctx, bk=bk, tp=tp)
    with bk.torch.no_grad():
        step()
    bk.synchronize()
    tensors = ref.cache_tensors(cache)
    for t in tensors:
        t.normal_()
    with bk.torch.no_grad():
        replay, graphed = ref.capture(bk, step)
        timing = time_fixed(bk, replay)
    row = {
        "model": card.id,
        "card": getattr(bk, "card_label", None) or card_label(bk, None),
        "dtype": "bf16",
        "kv_dtype": "bf16",
        "tp": tp,
        "engine": "transformers",
        "batch": batch,
        "ctx": ctx,
        "graph": graphed,
        "kv_allocated_bytes": bk.memory_allocated() - before,
        "kv_tensor_bytes": sum(t.numel() * t.element_size() for t in tensors),
        **timing,
    }
    del replay, step, cache, tensors
    ref.empty_cache(bk)
    return row


def main() -> None:
    """torchrun entry: every rank times every point; rank 0 writes e2e_decode_tp.csv under --out."""
    import torch.distributed as dist

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default="qwen3-8b,qwen3-32b")
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--ctx", default="512,4096")
    parser.add_argument("--device-kind", choices=["cuda", "npu", "cpu"], default=None)
    parser.add_argument("--card", default=None, help="profile id written in the rows (default: device name)")
    args = parser.parse_args()
    rank, tp = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    kind = args.device_kind or ("cpu" if os.environ.get("KVPLAN_TP_CPU") else "cuda")
    bk = open_backend("cpu" if kind == "cpu" else f"{kind}:{int(os.environ['LOCAL_RANK'])}")
    dist.init_process_group(
        DIST_BACKEND[kind],  # gloo / nccl / hccl
        timeout=dt.timedelta(seconds=180),
        device_id=None if kind == "cpu" else bk.device,
    )
    bk.card_label = card_label(bk, args.card)  # type: ignore[attr-defined]
    flash = kind == "cuda" and ref.check_gqa_attention(bk)[0]
    ref.register_attention(bk.torch, flash)
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / "e2e_decode_tp.csv" if rank == 0 else Path(os.devnull)  # rank 0 writes the rows
    with open(csv_path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=ref.CSV_FIELDS)
        writer.writeheader()
        for model_id in args.models.split(","):
            card = catalog.load_model(model_id)
            model = build_rank_model(bk, card, tp=tp)
            for ctx in (int(c) for c in args.ctx.split(",")):
                for batch in (int(b) for b in args.batches.split(",")):
                    row = run_point(bk, model, card, batch=batch, ctx=ctx, tp=tp)
                    writer.writerow({k: row.get(k) for k in ref.CSV_FIELDS})
                    handle.flush()
                    if rank == 0:
                        print(
                            f"[tp{tp}] {model_id} b={batch} ctx={ctx} "
                            f"step={row['decode_step_s'] * 1e3:.3f} ms graph={row['graph']}",
                            flush=True,
                        )
            del model
            ref.empty_cache(bk)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
