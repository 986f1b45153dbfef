"""Model cards: the architecture of one model in Hugging Face config.json field names, verbatim, and what
each attention kind means for the formulas (ATTENTION_KINDS). Re-exported by planner/schema.py.
"""

from typing import Literal, Self

from pydantic import Field, NonNegativeInt, PositiveInt, ValidationInfo, field_validator, model_validator

from planner.dtypes import WEIGHT_SCHEMES
from planner.records import record
from planner.schema_base import DataModel, HfSource, Source

LayerType = Literal["full_attention", "linear_attention"]
AttentionKind = Literal["mha", "gqa", "mla", "hybrid", "csa"]


@record
class AttentionTraits:
    """What an attention kind means for the formulas; a new kind is one ATTENTION_KINDS entry."""

    latent_kv: bool  # KV holds one compressed latent per token and layer, replicated on every rank (MLA)
    linear_layers: bool  # some layers are linear attention (Gated DeltaNet): a fixed state, no KV cache
    # DeepSeek-V4 compressed sparse attention: one shared K=V record per compress_ratios[i] tokens per layer
    # plus a sliding window and a compressor state per sequence (planner/csa.py)
    compressed_kv: bool = False


ATTENTION_KINDS: dict[AttentionKind, AttentionTraits] = {
    "mha": AttentionTraits(latent_kv=False, linear_layers=False),
    "gqa": AttentionTraits(latent_kv=False, linear_layers=False),
    "mla": AttentionTraits(latent_kv=True, linear_layers=False),
    "hybrid": AttentionTraits(latent_kv=False, linear_layers=True),
    "csa": AttentionTraits(latent_kv=False, linear_layers=False, compressed_kv=True),
}


# HF config names (and kvplan's) of the dtypes memory.py can size a recurrent state in
SSM_DTYPES = ("float32", "bfloat16", "float16", "fp32", "bf16", "fp16")
MAX_LAYERS = 10**4
MAX_CARD_INT = 10**8
# DeepSeek-V4: the compress ratio whose layers pick their records with a lightning indexer (CSA); other ratios
# (HCA, 128) attend every compressed record (planner/csa.py keeps the same constant).  [source: vllm-ascend
# 182b75ea vllm_ascend/models/deepseek_v4/model.py:566-588 (Compressor for ratio > 1, DeepseekV4Indexer for
# ratio 4)]
CSA_INDEXED_RATIO = 4


class ModelCard(DataModel):
    """Architecture of one model, in Hugging Face config.json field names."""

    schema_version: Literal[1] = 1
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    aliases: list[str] = Field(default_factory=list)
    source: HfSource
    sources: list[Source] = Field(min_length=1)
    model_type: str
    attention: AttentionKind
    # the checkpoint's stored dtype as Hugging Face names it (informational: --dtype sets what is planned)
    torch_dtype: Literal[
        "bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2", "int8", "uint8", "auto"
    ] = "bfloat16"
    # the kvplan weight dtype (--dtype, planner/dtypes.py) the released checkpoint is quantized to, as
    # `kvplan models import` reads config.json's quantization_config (or msModelSlim's description); None:
    # not quantized, or not stated. Informational like torch_dtype: the plan notes a --dtype that differs.
    checkpoint_dtype: str | None = None

    hidden_size: PositiveInt
    num_hidden_layers: PositiveInt
    num_attention_heads: PositiveInt
    num_key_value_heads: PositiveInt
    head_dim: PositiveInt | None = None
    intermediate_size: PositiveInt
    vocab_size: PositiveInt
    tie_word_embeddings: bool
    max_position_embeddings: PositiveInt
    attention_bias: bool = False
    qk_norm: bool = False  # Qwen3-style per-head RMSNorm on q and k (head_dim weights each)
    attn_output_gate: bool = False  # Qwen3-Next/3.5: q_proj also emits a sigmoid output gate
    partial_rotary_factor: float = Field(default=1.0, gt=0, le=1)  # share of head_dim that RoPE rotates

    # Hybrid models (Qwen3-Next / Qwen3.5): which layers are full attention.
    layer_types: list[LayerType] | None = None
    full_attention_interval: PositiveInt | None = None
    linear_conv_kernel_dim: PositiveInt | None = None
    linear_key_head_dim: PositiveInt | None = None
    linear_value_head_dim: PositiveInt | None = None
    linear_num_key_heads: PositiveInt | None = None
    linear_num_value_heads: PositiveInt | None = None
    mamba_ssm_dtype: str | None = None  # dtype of the recurrent state (Qwen3.5 configs: float32)

    # MoE (Qwen names first, DeepSeek names where they differ).
    num_experts: PositiveInt | None = None
    n_routed_experts: PositiveInt | None = None
    num_experts_per_tok: PositiveInt | None = None
    moe_intermediate_size: PositiveInt | None = None
    shared_expert_intermediate_size: PositiveInt | None = None
    n_shared_experts: PositiveInt | None = None
    first_k_dense_replace: NonNegativeInt = 0

    # MLA (DeepSeek).
    q_lora_rank: PositiveInt | None = None
    kv_lora_rank: PositiveInt | None = None
    qk_rope_head_dim: PositiveInt | None = None
    qk_nope_head_dim: PositiveInt | None = None
    v_head_dim: PositiveInt | None = None

    # Top-k sparse attention with an indexer: with these three a card keeps a second per-token cache of index
    # keys (one key of index_head_dim per token and sparse layer) and each query attends at most index_topk
    # tokens (tokens). On an MLA card, DeepSeek sparse attention (V3.2's lightning indexer, fed by q_lora); on
    # a GQA card, MiniMax sparse attention (MiniMax-M3: index_n_heads = num_key_value_heads index queries from
    # the hidden state, whole blocks picked, index_topk = sparse_topk_blocks x sparse_block_size).
    index_n_heads: PositiveInt | None = None
    index_head_dim: PositiveInt | None = None
    index_topk: PositiveInt | None = None
    # MiniMax-M3's sparse_attention_config.sparse_attention_freq: 1 where a layer is sparse (keeps index keys,
    # attends top-k), 0 where it attends densely without an indexer; absent, every full-attention layer is.
    sparse_attention_freq: list[Literal[0, 1]] | None = None

    # DeepSeek-V4 compressed sparse attention (attention 'csa'; planner/csa.py): compress_ratios[i] is layer
    # i's compression (0: the sliding window only; 4: CSA, one record per 4 tokens, top-index_topk picked by
    # the indexer; 128: HCA, one record per 128 tokens, all attended); entries past num_hidden_layers are the
    # MTP layers'. Every layer also attends its last sliding_window tokens (tokens). q: hidden -> q_lora_rank
    # -> heads x head_dim; one shared K=V head of head_dim (qk_rope_head_dim of it rotated); the output
    # projection is grouped: o_groups groups of heads x head_dim / o_groups -> o_lora_rank each, then
    # o_groups x o_lora_rank -> hidden. hc_mult residual streams (mHC); the first num_hash_layers route
    # their experts by token id (a hash table, no learned gate).
    compress_ratios: list[int] | None = None
    sliding_window: PositiveInt | None = None
    o_lora_rank: PositiveInt | None = None
    o_groups: PositiveInt | None = None
    hc_mult: int = Field(default=1, gt=0)
    num_hash_layers: NonNegativeInt = 0

    # Multi-token-prediction layers shipped with the checkpoint.
    num_nextn_predict_layers: NonNegativeInt = 0  # DeepSeek name
    mtp_num_hidden_layers: NonNegativeInt = 0  # Qwen3.5 name

    # The released checkpoint also holds a vision tower that this card's text geometry leaves out (the engines
    # load it with the text model): the plan says its weights are not counted.
    vision_tower_uncounted: bool = False
    # The checkpoint's own Python code (config, tokenizer: config.json auto_map) must run to load it: engines
    # need trust_remote_code (vLLM --trust-remote-code, MindIE trustRemoteCode).
    trust_remote_code: bool = False

    notes: str = ""

    @field_validator("*", mode="after")
    @classmethod
    def _check_size(cls, value: object, info: ValidationInfo) -> object:
        """Every count of a card is bounded: 10^4 layers, 10^8 for any other size (vocab, widths)."""
        limit = MAX_LAYERS if info.field_name == "num_hidden_layers" else MAX_CARD_INT
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise ValueError(f"must be <= {limit} (got a {len(str(value))}-digit number)")
        return value

    @field_validator("checkpoint_dtype")
    @classmethod
    def _known_dtype(cls, value: str | None) -> str | None:
        if value is not None and value not in WEIGHT_SCHEMES:
            raise ValueError(
                f"unknown weight dtype (got {value!r}, expected one of {', '.join(WEIGHT_SCHEMES)})"
            )
        return value

    @model_validator(mode="after")
    def _check_geometry(self) -> Self:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads must be a multiple of num_key_value_heads "
                f"(got {self.num_attention_heads} and {self.num_key_value_heads})"
            )
        if not self.attention_traits.latent_kv and self.head_dim is None:
            raise ValueError("head_dim is required for non-MLA attention (write it explicitly)")
        if self.layer_types is not None and len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"layer_types must have num_hidden_layers entries "
                f"(got {len(self.layer_types)}, expected {self.num_hidden_layers})"
            )
        if self.resolved_layer_types.count("full_attention") == 0:
            raise ValueError(
                "no layer keeps a KV cache (got every layer linear_attention, expected at least one "
                "full_attention layer)"
            )
        self._check_hybrid()
        self._check_mla()
        self._check_sparse_attention()
        self._check_compressed()
        self._check_moe()
        return self

    def _check_hybrid(self) -> None:
        hybrid_fields = (
            self.linear_conv_kernel_dim,
            self.linear_key_head_dim,
            self.linear_value_head_dim,
            self.linear_num_key_heads,
            self.linear_num_value_heads,
        )
        if self.attention_traits.linear_layers:
            if any(f is None for f in hybrid_fields):
                raise ValueError(
                    "attention 'hybrid' needs every linear_* field (conv kernel, head dims, heads)"
                )
            if self.layer_types is None and self.full_attention_interval is None:
                raise ValueError("attention 'hybrid' needs layer_types or full_attention_interval")
        elif any(f is not None for f in hybrid_fields):
            raise ValueError(
                f"linear_* fields are only valid with attention 'hybrid' (got {self.attention!r})"
            )
        if self.mamba_ssm_dtype is not None and self.mamba_ssm_dtype.strip().lower() not in SSM_DTYPES:
            raise ValueError(
                f"mamba_ssm_dtype: unknown dtype (got {self.mamba_ssm_dtype!r}, expected one of "
                f"{', '.join(SSM_DTYPES)})"
            )

    def _check_mla(self) -> None:
        mla_fields = (self.kv_lora_rank, self.qk_rope_head_dim, self.qk_nope_head_dim, self.v_head_dim)
        if self.attention_traits.latent_kv and any(f is None for f in mla_fields):
            raise ValueError(
                "attention 'mla' needs kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim"
            )

    def _check_sparse_attention(self) -> None:
        indexer_fields = (self.index_n_heads, self.index_head_dim, self.index_topk)
        freq = self.sparse_attention_freq
        if freq is not None and (len(freq) != self.num_hidden_layers or self.index_topk is None):
            raise ValueError(
                f"sparse_attention_freq needs the index_* fields and num_hidden_layers entries "
                f"(got {len(freq)} entries, index_topk {self.index_topk})"
            )
        if all(f is None for f in indexer_fields):
            return
        if any(f is None for f in indexer_fields):
            raise ValueError(
                "DeepSeek sparse attention needs index_n_heads, index_head_dim and index_topk together "
                f"(got {', '.join('set' if f is not None else 'missing' for f in indexer_fields)})"
            )
        if self.attention_traits.latent_kv and not self.q_lora_rank:
            raise ValueError(
                "index_* fields on an 'mla' card need a q_lora_rank (the indexer reads the q_lora latent)"
            )
        if self.attention_traits.linear_layers:
            raise ValueError("index_* fields are not valid with attention 'hybrid'")
        if self.attention_traits.compressed_kv:
            return
        if not self.attention_traits.latent_kv and self.index_n_heads != self.num_key_value_heads:
            raise ValueError(
                f"index_n_heads must equal num_key_value_heads on a GQA card (got {self.index_n_heads} and "
                f"{self.num_key_value_heads}): MiniMax sparse attention picks blocks once per KV head"
            )

    def _check_compressed(self) -> None:
        ratios = self.compress_ratios
        if not self.attention_traits.compressed_kv:
            if ratios is not None:
                raise ValueError(
                    f"compress_ratios is only valid with attention 'csa' (got {self.attention!r})"
                )
            return
        needed = (ratios, self.sliding_window, self.q_lora_rank, self.qk_rope_head_dim, self.o_lora_rank,
                  self.o_groups)  # fmt: skip
        if any(f is None for f in needed) or ratios is None:
            raise ValueError(
                "attention 'csa' needs compress_ratios, sliding_window, q_lora_rank, qk_rope_head_dim, "
                "o_lora_rank and o_groups"
            )
        if len(ratios) < self.num_hidden_layers or any(r == 1 or r < 0 for r in ratios):
            raise ValueError(
                f"compress_ratios needs num_hidden_layers entries of 0 or > 1 (got {len(ratios)} entries)"
            )
        if self.num_key_value_heads != 1 or self.num_attention_heads % (self.o_groups or 1):
            raise ValueError("attention 'csa' has one shared K=V head and heads divisible by o_groups")
        if any(r == CSA_INDEXED_RATIO for r in ratios) and not self.is_sparse_attention:
            raise ValueError("compress ratio 4 layers need the index_* fields (their lightning indexer)")

    def _check_moe(self) -> None:
        # counts of layers that are some of the model's layers (dense-first, hash-routed), or as many again
        # at most (the MTP layers past the last one: checkpoints ship 1 to 3)
        for name in ("first_k_dense_replace", "num_hash_layers", "num_nextn_predict_layers",
                     "mtp_num_hidden_layers"):  # fmt: skip
            if getattr(self, name) > self.num_hidden_layers:
                raise ValueError(
                    f"{name} must be <= num_hidden_layers "
                    f"(got {getattr(self, name)}, expected <= {self.num_hidden_layers})"
                )
        if self.routed_expert_count and not (self.num_experts_per_tok and self.moe_intermediate_size):
            raise ValueError("MoE cards need num_experts_per_tok and moe_intermediate_size")
        if (
            self.routed_expert_count
            and self.num_experts_per_tok
            and (self.num_experts_per_tok > self.routed_expert_count)
        ):
            raise ValueError(
                f"num_experts_per_tok must be <= the expert count "
                f"(got {self.num_experts_per_tok}, expected <= {self.routed_expert_count})"
            )

    @property
    def routed_expert_count(self) -> int:
        """Routed experts per MoE layer (0 for dense models)."""
        return self.num_experts or self.n_routed_experts or 0

    @property
    def is_moe(self) -> bool:
        """True when the MLP of (some) layers is a routed mixture of experts."""
        return self.routed_expert_count > 0

    @property
    def is_sparse_attention(self) -> bool:
        """True when an indexer picks each query's index_topk keys (DeepSeek or MiniMax sparse attention)."""
        return self.index_topk is not None

    @property
    def sparse_attention_layers(self) -> int:
        """Layers that keep index keys and attend top-k (sparse_attention_freq; DeepSeek-V4: the ratio-4
        layers; else every full-attention layer of a sparse card; 0 for dense attention)."""
        if not self.is_sparse_attention:
            return 0
        if self.compress_ratios is not None:
            return self.compress_ratios[: self.num_hidden_layers].count(CSA_INDEXED_RATIO)
        if self.sparse_attention_freq is None:
            return self.full_attention_layers
        return sum(self.sparse_attention_freq)

    @property
    def mtp_layers(self) -> int:
        """Multi-token-prediction layers shipped with the checkpoint (either HF spelling)."""
        return self.num_nextn_predict_layers or self.mtp_num_hidden_layers

    @property
    def attention_traits(self) -> AttentionTraits:
        """The formulas' view of this card's attention kind (ATTENTION_KINDS)."""
        return ATTENTION_KINDS[self.attention]

    @property
    def resolved_layer_types(self) -> list[LayerType]:
        """Per-layer attention kind; with full_attention_interval k, every k-th layer (1-based) is full."""
        if self.layer_types is not None:
            return list(self.layer_types)
        if not self.attention_traits.linear_layers or self.full_attention_interval is None:
            return ["full_attention"] * self.num_hidden_layers
        k = self.full_attention_interval
        return [
            "full_attention" if (i + 1) % k == 0 else "linear_attention"
            for i in range(self.num_hidden_layers)
        ]

    @property
    def full_attention_layers(self) -> int:
        """Layers that keep a KV (or MLA latent) cache."""
        return self.resolved_layer_types.count("full_attention")

    @property
    def linear_attention_layers(self) -> int:
        """Gated DeltaNet layers, which keep a fixed-size state per sequence instead of a KV cache."""
        return self.resolved_layer_types.count("linear_attention")

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a routed MoE (DeepSeek keeps the first first_k_dense_replace layers dense)."""
        return self.num_hidden_layers - self.first_k_dense_replace if self.is_moe else 0
