"""Weights and KV cache of a separate draft model (vLLM's --speculative-config methods eagle3 and dflash).

The draft's tensors carry the names and part of the MTP layers ("mtp.*", part "draft"), so the step model
costs them with the same ops as an MTP head (planner/perf/opcost.py: mtp.layer, mtp.attention,
mtp.lm_head); how many passes, of how many tokens, is the method's (planner/perf/roofline.decode_step).

Shapes come from the engine's model code, sizes that the corpus does not state are assumed and tagged:
- eagle3 (vllm/model_executor/models/llama_eagle3.py, the drafter vllm-ascend loads): one Llama decoder
  layer at the target's hidden size H whose q/k/v read 2H (token embedding and hidden state side by side),
  an fc 3H -> H over three target layers' hidden states, input/hidden/post-attention/final norms, and its
  own lm_head over a reduced draft vocabulary; the token embedding is the target's (shared).
- dflash (vllm-ascend vllm_ascend/spec_decode/dflash_proposer.py @2cd683a396, set_inputs_first_pass): a
  block-diffusion drafter of several decoder layers whose queries (the bonus token + k mask tokens) attend
  K/V projected from the target's hidden states of a few tapped layers (fc n*H -> H); embedding and
  lm_head are the target's.
Draft weights are stored in 16 bits whatever the target's scheme (memory.linear_scheme: part "draft"; vLLM
loads a draft with its own checkpoint's quantization). Both drafters' attention is costed as the target's
attention kind (heads, KV heads, head_dim; MLA for an MLA target), and their MLP as a dense SwiGLU of the
target's intermediate_size.  [assumed: the draft checkpoints' config.json files are not in the corpus]
"""

from __future__ import annotations

from planner.deployment import DRAFT_MODEL_LAYERS
from planner.dtypes import StorageDType
from planner.params import (
    Linear,
    Plain,
    attention_tensors,
    dense_mlp_tensors,
    kv_heads_per_rank,
    mla_tensors,
    split,
)
from planner.schema_card import ModelCard
from planner.units import BITS_PER_BYTE

EAGLE3_TARGET_LAYERS = 3  # fc reads three target layers' hidden states (3H -> H)
# [assumed: the draft_vocab_size of the published EAGLE3 heads (32000, a d2t map to the target vocabulary);
# the corpus's draft checkpoints do not state theirs]
EAGLE3_DRAFT_VOCAB = 32_000
# [assumed: z-lab's DFlash drafters and DeepSpec's block drafters read 5 tapped target layers (e.g.
# target_layer_ids [1, 9, 17, 25, 33] of Qwen3-4B); their layer count: deployment.DRAFT_MODEL_LAYERS]
DFLASH_TARGET_LAYERS = 5
TARGET_LAYERS_READ = {"eagle3": EAGLE3_TARGET_LAYERS, "dflash": DFLASH_TARGET_LAYERS}


def draft_layers(method: str | None) -> int:
    """Decoder layers of the draft model of `method` (0 for none or MTP, whose layers are the card's)."""
    return DRAFT_MODEL_LAYERS.get(method or "", 0)


def draft_model_tensors(card: ModelCard, *, method: str | None, tp: int) -> list[Linear | Plain]:
    """Weights of the draft model on one rank, named and parted as MTP tensors ("mtp.*", part "draft").

    Formula (n = draft_layers, t = target layers read, H = hidden_size, per rank):
        fc       t*H -> H (replicated)            norms   (3n + 2) * H
        layers   the target's attention + SwiGLU of intermediate_size, n layers, tp-split as the target's;
                 eagle3's attention input projections read 2H
        lm_head  ceil(V_draft / tp) * H  (eagle3's own reduced vocabulary; dflash shares the target's)
    Returns [] when no draft model is in use.
    """
    layers = draft_layers(method)
    if not layers or method is None:
        return []
    hidden = card.hidden_size
    attention = mla_tensors if card.attention_traits.latent_kv else attention_tensors
    widen = 2 if method == "eagle3" else 1  # eagle3's q/k/v read [embedding, hidden]: 2H
    tensors: list[Linear | Plain] = [
        Plain("draft_norms", "draft", (3 * layers + 2) * hidden, 1),
        Linear("draft_fc", "draft", TARGET_LAYERS_READ[method] * hidden, hidden, 1),
        *[_widened(t, hidden=hidden, factor=widen) for t in attention(card, tp=tp, layers=layers)],
        *dense_mlp_tensors(card, tp=tp, layers=layers, width=card.intermediate_size),
    ]
    named = [_as_draft(t) for t in tensors]
    if method == "eagle3":
        named.append(Plain("mtp.lm_head", "draft", split(EAGLE3_DRAFT_VOCAB, tp) * hidden, 1))
    return named


def _widened(tensor: Linear | Plain, *, hidden: int, factor: int) -> Linear | Plain:
    """An attention input projection reading factor * H instead of H (o_proj and norms unchanged)."""
    if isinstance(tensor, Linear) and tensor.in_features == hidden and tensor.name != "o_proj":
        return Linear(tensor.name, tensor.part, factor * hidden, tensor.out_features, tensor.count)
    return tensor


def _as_draft(tensor: Linear | Plain) -> Linear | Plain:
    if isinstance(tensor, Linear):
        return Linear(f"mtp.{tensor.name}", "draft", tensor.in_features, tensor.out_features, tensor.count)
    return Plain(f"mtp.{tensor.name}", "draft", tensor.elements_each, tensor.count)


def draft_vocab_rows_per_rank(card: ModelCard, *, method: str | None, tp: int) -> int:
    """Vocabulary rows the draft's lm_head computes on one rank: eagle3's reduced vocabulary, else the
    target's (MTP and dflash sample from the shared head). Formula: ceil(V / tp)."""
    vocab = EAGLE3_DRAFT_VOCAB if method == "eagle3" else card.vocab_size
    return split(vocab, tp)


def draft_kv_bytes_per_token(card: ModelCard, *, method: str | None, kv_dtype: StorageDType, tp: int) -> int:
    """KV-cache bytes one token occupies in the draft model's own layers on one rank (0 without one).

    Formula: n * (one target attention layer's bytes per token), n = draft_layers; GQA/MHA:
    2 * H_kv_rank * d * b / 8 per layer, MLA: (kv_lora_rank + qk_rope_head_dim) * b / 8 per layer
    (memory.kv_cache_bytes_per_token's formulas). vLLM allocates the draft's attention layers in the same
    paged pool as the target's, block for block.
    """
    layers = draft_layers(method)
    if card.attention_traits.latent_kv:
        width = (card.kv_lora_rank or 0) + (card.qk_rope_head_dim or 0)
        return layers * width * kv_dtype.bits // BITS_PER_BYTE
    heads = kv_heads_per_rank(card, tp=tp)
    return 2 * layers * heads * (card.head_dim or 0) * kv_dtype.bits // BITS_PER_BYTE
