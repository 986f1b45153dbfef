"""Per-op weight bytes, matmul elements and activation traffic, from params.model_tensors shapes.

Every tensor of one rank is assigned to the ledger op that streams it in a forward pass, so the ledger's
weight bytes add up to memory.weight_bytes_per_device (minus the embedding table, which is gathered row
by row, not streamed; with tied embeddings the lm_head streams that same table).
"""

from __future__ import annotations

from planner import layout
from planner.deployment import Deployment
from planner.drafts import draft_model_tensors, draft_vocab_rows_per_rank
from planner.memory import linear_weight_bytes, plain_tensor_bytes
from planner.params import Linear, Plain, model_tensors, split
from planner.perf.kernels import OP_NAMES
from planner.records import field, record

# Ops that stream weights: the kernel ops minus the weightless ones, plus the MTP layer's experts (costed
# apart from the rest of mtp.layer, which owns their kernels).
# mtp.lm_head holds weights only when a draft model brings its own head (eagle3's reduced vocabulary,
# planner/drafts.py); an MTP head samples from the target's lm_head.
WEIGHTLESS_OPS = frozenset(
    {"attn.qk_norm", "attn.core", "attn.kernel", "attn.indexer", "mtp.attention", "mtp.indexer"}
)
OPS: tuple[str, ...] = (*(op for op in OP_NAMES if op not in WEIGHTLESS_OPS), "mtp.experts")
# Plain tensors that are matmul weights (they cost 2 FLOP per element per token) and compute in the
# 16-bit activation dtype, as the engines keep them unquantized.
PLAIN_MATMULS = frozenset({
    "router", "lm_head", "shared_expert_gate", "mtp.router", "mtp.shared_expert_gate", "mtp.lm_head",
    "indexer.wk_weights_proj", "mtp.indexer.wk_weights_proj",
    "indexer.weights_proj", "mtp.indexer.weights_proj",
})  # fmt: skip
_BY_PART = {"embedding": "embedding", "lm_head": "lm_head", "norm": "norms", "moe_shared": "moe.shared"}


@record
class OpWeights:
    """Per-op totals on one rank (all layers of the op together).

    weight_bytes                   bytes streamed when the op runs (quantized matmuls with scales)
    matmul_elements                weight elements that multiply every token (2 FLOP each)
    activation_elements_per_token  input + output activation elements per token (sum over layers)
    unquantized                    ops that compute in the activation dtype, not the scheme's
    """

    weight_bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    matmul_elements: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    activation_elements_per_token: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    unquantized: frozenset[str] = frozenset({"moe.router", "lm_head"})


def op_of_tensor(tensor: Linear | Plain) -> str:
    """The ledger op that streams this tensor (see OPS)."""
    if tensor.name == "mtp.lm_head":
        return "mtp.lm_head"
    if tensor.name.startswith("mtp."):
        return (
            "mtp.experts"
            if tensor.part == "moe_experts" or tensor.name.startswith("mtp.experts.")
            else ("mtp.layer")
        )
    if tensor.part in _BY_PART:
        return _BY_PART[tensor.part]
    if tensor.part == "attention":
        return "attn.o_proj" if tensor.name == "o_proj" else "attn.qkv_proj"
    if tensor.part == "linear_attention":
        if isinstance(tensor, Plain):
            return "gdn.update"
        return "gdn.out_proj" if tensor.name == "out_proj" else "gdn.in_proj"
    if tensor.part == "mlp":
        return "mlp.gate_up" if tensor.name == "gate_up_proj" else "mlp.down"
    return "moe.experts" if isinstance(tensor, Linear) else "moe.router"


def _add_tensor(weights: OpWeights, tensor: Linear | Plain, *, dep: Deployment) -> None:
    op = op_of_tensor(tensor)
    if isinstance(tensor, Linear):
        weights.weight_bytes[op] += linear_weight_bytes(tensor, scheme=dep.weight_scheme)
        weights.matmul_elements[op] += tensor.elements
        weights.activation_elements_per_token[op] += tensor.count * (tensor.in_features + tensor.out_features)
        return
    weights.weight_bytes[op] += plain_tensor_bytes(tensor, dtype=dep.activation_dtype)
    if tensor.name in PLAIN_MATMULS:
        weights.matmul_elements[op] += tensor.elements


def op_weights(dep: Deployment) -> OpWeights:
    """Bucket every weight of one rank by ledger op.

    Formula (per op): weight_bytes = sum of memory.linear_weight_bytes (matmuls) + plain_tensor_bytes (rest);
    matmul_elements = sum of matmul weight elements; activation elements per token = sum count*(in+out).
    Routed-expert activations are scaled by k / E_rank (a token's k rows, each through one of the rank's
    E_rank experts; opcost scales the rows by the layout's share). Shapes follow the layout's shards
    (planner/layout.py: experts per rank, moe_tp, the fullest pipeline stage). The lm_head reads
    ceil(V / tp) * H weights: the untied head, or the embedding table when tied.
    """
    card = dep.model
    weights = OpWeights()
    embedding_bytes = 0
    tensors = model_tensors(card, tp=dep.tp, include_mtp=dep.include_mtp, shards=layout.speed_shards(dep))
    for tensor in tensors + draft_model_tensors(card, method=dep.draft_method, tp=dep.tp):
        if tensor.part == "embedding" and isinstance(tensor, Plain):
            embedding_bytes += plain_tensor_bytes(tensor, dtype=dep.activation_dtype)
            continue
        _add_tensor(weights, tensor, dep=dep)
    vocab_rows = split(card.vocab_size, dep.tp)
    if card.tie_word_embeddings:
        weights.weight_bytes["lm_head"] += embedding_bytes
    weights.matmul_elements["lm_head"] = vocab_rows * card.hidden_size
    weights.activation_elements_per_token["lm_head"] = vocab_rows + card.hidden_size
    if weights.weight_bytes["mtp.lm_head"]:
        draft_rows = draft_vocab_rows_per_rank(card, method=dep.draft_method, tp=dep.tp)
        weights.activation_elements_per_token["mtp.lm_head"] = draft_rows + card.hidden_size
    if card.is_moe:
        for op in ("moe.experts", "mtp.experts"):
            per_token = weights.activation_elements_per_token[op]
            weights.activation_elements_per_token[op] = (
                per_token * (card.num_experts_per_tok or 0) // layout.experts_per_rank(dep)
            )
    return weights
