"""Tensor-parallel divisibility the engines check before they load anything (KV dtypes: each engine's room,
planner/engines/mindie/pool.py and planner/engines/vllm/batch.py).

capacity.check_supported raises the one-line PlanInputError; every command goes through it.

TP divisibility (vLLM's `divide()` asserts exact division, vllm/distributed/utils.py; vLLM 0.27.1):
  attention heads   num_attention_heads % tp == 0          model_executor/layers/linear.py QKVParallelLinear
  KV heads          kv % tp == 0 when tp < kv, else        linear.py QKVParallelLinear (num_kv_head_replicas =
                    tp % kv == 0 (heads replicated)        divide(tp, total_num_kv_heads))
  linear attention  linear_num_key_heads % tp == 0 and     models/qwen3_next.py Qwen3NextGatedDeltaNet
                    linear_num_value_heads % tp == 0       (divide(num_v_heads, tp), conv_dim / tp)
  MLA (DeepSeek)    attention heads only: the latent is replicated on every rank
  vocab             no check: VocabParallelEmbedding pads the vocabulary to a multiple of 64 * tp
MindIE is held to the same rules: its ATB models shard heads the same way (assumed; MindIE-LLM's weight
loaders were not checked line by line).
"""

from __future__ import annotations

from planner.deployment import Deployment
from planner.errors import PlanInputError
from planner.schema import ModelCard

VLLM_TP_SOURCE = "vLLM divide() in linear.py QKVParallelLinear / models/qwen3_next.py, v0.27.1"


def kv_head_rule(kv_heads: int, *, tp: int) -> str | None:
    """Why tp cannot shard kv_heads KV heads (None if it can): split when tp < kv, else replicated."""
    if tp < kv_heads and kv_heads % tp:
        return f"{kv_heads} KV heads are not divisible by {tp}"
    if tp >= kv_heads and tp % kv_heads:
        return f"{tp} is not a multiple of the {kv_heads} KV heads it replicates"
    return None


def tp_failures(card: ModelCard, *, tp: int) -> list[str]:
    """Every head count of the card that tensor parallelism of degree tp cannot shard, in words."""
    failures: list[str] = []
    if card.num_attention_heads % tp:
        failures.append(f"{card.num_attention_heads} attention heads are not divisible by {tp}")
    if not card.attention_traits.latent_kv:
        kv = kv_head_rule(card.num_key_value_heads, tp=tp)
        failures += [kv] if kv else []
    if card.attention_traits.linear_layers:
        for name, heads in (
            ("linear-attention key", card.linear_num_key_heads or 0),
            ("linear-attention value", card.linear_num_value_heads or 0),
        ):
            if heads % tp:
                failures.append(f"{heads} {name} heads are not divisible by {tp}")
    return failures


def valid_tp(card: ModelCard, *, limit: int = 64) -> list[int]:
    """Powers of two up to limit that pass every divisibility check (for the hint)."""
    return [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= limit and not tp_failures(card, tp=t)]


def check_tp(dep: Deployment) -> None:
    """PlanInputError naming each head count --tp cannot shard, with the engine's source."""
    failures = tp_failures(dep.model, tp=dep.tp)
    if failures:
        valid = ", ".join(map(str, valid_tp(dep.model)))
        raise PlanInputError(
            f"--tp: {dep.tp} cannot shard {dep.model.id}: {'; '.join(failures)} "
            f"(got {dep.tp}, expected one of {valid}; {VLLM_TP_SOURCE}; MindIE shards heads alike)"
        )
