"""vLLM / vllm-ascend KV-pool accounting (pure): how many full-length requests the engine's block pool holds.

Spec with file:line citations: docs/engines/vllm-memory.md (vLLM 0.27.1, commit 6e448d0ea; vllm-ascend
main 182b75ea, which pins vLLM v0.27.1). The memory available to the pool is an input (bytes per rank):
the plan's vLLM batch, `kvplan vllm` and the dashboard pass the engine's own start-up budget
(startup.plan_budget -> StartupTerms.available_kv_bytes, the one implementation of spec step 1); what this
module computes is how that memory is cut into blocks (spec steps 2-7).

Platforms:
  "cuda"            vLLM 0.27.1 on CUDA (attention backends with MultipleOf(16) kernel blocks)
  "ascend"          vllm-ascend 182b75ea: hybrid block size from the K half only (issue #7393)
  "ascend-pr14543"  vllm-ascend with the open fix PRs #14543 / #16261: block size from K+V
  "ascend-v0.12"    vllm-ascend v0.12.0rc1 .. v0.15.x: vLLM's rule, 128-token alignment (K+V, conv + ssm;
                    [VA] v0.12.0rc1 vllm_ascend/patch/platform/patch_mamba_config.py:37-62); the K-half rule
                    arrived with commit d39d80830c (2026-03-09), first tagged in v0.16.0rc1
"""

import math
from typing import Literal

from planner import csa
from planner.deployment import Deployment
from planner.dtypes import StorageDType
from planner.engines.vllm.pages import conv_state_bytes as conv_state_bytes
from planner.engines.vllm.pages import kv_cache_size_tokens as kv_cache_size_tokens
from planner.engines.vllm.pages import kv_cache_size_tokens_by_blocks as kv_cache_size_tokens_by_blocks
from planner.engines.vllm.pages import max_concurrency as max_concurrency
from planner.engines.vllm.pages import ssm_state_bytes as ssm_state_bytes
from planner.engines.vllm.versions import Platform
from planner.params import indexer_key_bytes_per_layer, kv_heads_per_rank
from planner.schema import BUILT_ON_FIRST_USE, Frozen, ModelCard
from planner.units import BITS_PER_BYTE, PERCENT

CUDA_DEFAULT_BLOCK_TOKENS = 16  # vllm/config/cache.py:47 DEFAULT_BLOCK_SIZE; flash_attn.py:84 MultipleOf(16)
ASCEND_BLOCK_TOKENS = 128  # [VA] utils.py:1162-1212 refresh_block_size; attention_v1.py:148 kernel [128]
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # vllm/config/cache.py:68 (vllm-ascend does not override it)
GROUP_SIZE_SPREAD = 1.5  # kv_cache_utils.py:1244-1256: one group size when max < 1.5 x min layer count


class VllmPool(Frozen):
    """vLLM's KV pool for one deployment (per rank) and the figures it logs at start-up."""

    model_config = BUILT_ON_FIRST_USE

    platform: Platform
    block_size_tokens: int
    page_bytes: int
    layers_per_group: int
    block_bytes: int  # one block id over the pool: page x layers_per_group (+ index pages), bytes
    attention_groups: int
    state_groups: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_cache_size_tokens: int
    mamba_cache_mode: Literal["none", "align"]
    max_model_len_tokens: int


class PoolSettings(Frozen):
    """The settings vLLM cuts one rank's KV pool with, besides the model and the memory (spec steps 2-6),
    taken from its cache, model, parallel and speculative configs:

        platform              the block rule (cuda, ascend, ascend-pr14543, ascend-v0.12; module docstring)
        kv_dtype              attention K/V element type (--kv-cache-dtype), bits per element
        conv_dtype            GDN conv-state element type (the activation dtype); the ssm state may be wider
        tp                    tensor-parallel ranks the heads are split over (count)
        max_model_len_tokens  tokens one full-length request holds (--max-model-len)
        prefix_caching        --enable-prefix-caching: mamba_cache_mode align, one more state block per group
        num_spec              speculative tokens per step (num_speculative_tokens); widens the conv state
        user_block_tokens     --block-size in tokens, or None for the platform's default
        draft_layers          a separate draft model's attention layers, or None: the card's MTP layers when
                              num_spec > 0 (planner/drafts.py)
    """

    model_config = BUILT_ON_FIRST_USE

    platform: Platform
    kv_dtype: StorageDType
    conv_dtype: StorageDType
    tp: int
    max_model_len_tokens: int
    prefix_caching: bool = False
    num_spec: int = 0
    user_block_tokens: int | None = None
    draft_layers: int | None = None


def platform_for(vendor: str, *, ascend_page_fix: bool = False) -> Platform:
    """The vLLM platform of a card vendor: nvidia -> cuda, huawei -> vllm-ascend (with or without the fix)."""
    if vendor == "nvidia":
        return "cuda"
    return "ascend-pr14543" if ascend_page_fix else "ascend"


def attention_bytes_per_token(card: ModelCard, *, kv_dtype: StorageDType, tp: int) -> int:
    """K+V bytes of one token in one attention layer on one rank (FullAttentionSpec with block_size 1).

    Formula (GQA/MHA): 2 * H_kv_rank * d * b / 8    (kv_cache_interface.py:184-271)
    Formula (MLA):     (kv_lora_rank + qk_rope_head_dim) * b / 8 + x, replicated on every rank
                       (MLAAttentionSpec kv_cache_interface.py:389-427; [VA] AscendMLAAttentionSpec :55-61)
        x  params.indexer_key_bytes_per_layer: DeepSeek sparse attention's index-key cache. vllm-ascend gives
           it its own spec (AscendSFAIndexerCacheSpec, [VA] core/kv_cache_interface.py:119-138) registered as
           full attention, so it joins the MLA layers' uniform-type group and shares their block ids: one
           128-token block reserves an MLA page and an index page in every layer ([VA] :235-251;
           attention/indexer.py:57-58 kernel block sizes [128]). The pool therefore sees one page of
           block * (latent + x) per layer, the sum vLLM's UniformTypeKVCacheSpecs divides the memory by.
    """
    if card.attention_traits.latent_kv:
        latent_bytes = (
            ((card.kv_lora_rank or 0) + (card.qk_rope_head_dim or 0)) * kv_dtype.bits // BITS_PER_BYTE
        )
        return latent_bytes + indexer_key_bytes_per_layer(card, kv_dtype=kv_dtype)
    return 2 * kv_heads_per_rank(card, tp=tp) * (card.head_dim or 0) * kv_dtype.bits // BITS_PER_BYTE


def key_bytes_per_token(card: ModelCard, *, kv_dtype: StorageDType, tp: int) -> int:
    """The K half only, which vllm-ascend sizes hybrid blocks from ([VA] patch_mamba_config.py:85-92).

    Formula: GQA/MHA H_kv_rank * d * b / 8;  MLA kv_lora_rank * b / 8
    """
    if card.attention_traits.latent_kv:
        return (card.kv_lora_rank or 0) * kv_dtype.bits // BITS_PER_BYTE
    return attention_bytes_per_token(card, kv_dtype=kv_dtype, tp=tp) // 2


def hybrid_block_and_page(
    settings: PoolSettings, *, kv_tok: int, k_tok: int, conv: int, ssm: int
) -> tuple[int, int]:
    """(attention block size in tokens, unified page bytes) for a hybrid attention + GDN model.

    kv_tok, k_tok: K+V and K-only bytes per token and layer; conv, ssm: state bytes per layer and sequence;
    settings.platform picks the rule below, settings.user_block_tokens is its --block-size.

    cuda (vllm/platforms/interface.py:765-937 _align_hybrid_block_size, mamba_cache_mode none/align):
        a = max(16, --block-size);  block = a * ceil((conv + ssm) / (a * kv_tok));  page = block * kv_tok
    ascend ([VA] patch_mamba_config.py:58-117, the K half only, issue #7393):
        block = 128 * ceil(ssm / (128 * k_tok));  page = block * kv_tok + conv
    ascend-pr14543 (open fix PRs #14543 / #16261):
        block = 128 * ceil(ssm / (128 * kv_tok));  page = block * kv_tok + conv
    ascend-v0.12 ([VA] v0.12.0rc1 patch_mamba_config.py:37-62, block_alignment_bytes = 128):
        block = 128 * ceil((conv + ssm) / (128 * kv_tok));  page = block * kv_tok (the state page padded)
    """
    platform = settings.platform
    if platform in ("cuda", "ascend-v0.12"):
        floor = CUDA_DEFAULT_BLOCK_TOKENS if platform == "cuda" else ASCEND_BLOCK_TOKENS
        align = max(floor, settings.user_block_tokens or floor)
        block = align * math.ceil((conv + ssm) / (align * kv_tok))
        return block, block * kv_tok
    per_token = k_tok if platform == "ascend" else kv_tok
    block = ASCEND_BLOCK_TOKENS * math.ceil(ssm / (ASCEND_BLOCK_TOKENS * per_token))
    return block, block * kv_tok + conv


def plain_block_tokens(platform: Platform, *, user_block_tokens: int | None) -> int:
    """Block size of a model with attention layers only.

    vllm-ascend forces 128 when prefix caching or chunked prefill is on, both on by default
    ([VA] utils.py:1162-1212); vLLM on CUDA takes --block-size (any int > 0, cache.py:49) or 16.
    """
    if platform == "cuda":
        return user_block_tokens or CUDA_DEFAULT_BLOCK_TOKENS
    return ASCEND_BLOCK_TOKENS


def group_size(layer_counts: list[int]) -> int:
    """Layers per KV-cache group (kv_cache_utils.py:1244-1256 _get_kv_cache_groups_uniform_page_size).

    Formula: g = max(counts) if max < 1.5 * min(counts) else min(counts)
    """
    low, high = min(layer_counts), max(layer_counts)
    return high if high < low * GROUP_SIZE_SPREAD else low


def blocks_in_pool(available_bytes: int, *, page_bytes: int, layers_per_group: int) -> int:
    """Block ids the pool holds (kv_cache_utils.py:993-1010 get_num_blocks): available // page // g.

    g tensors of page * num_blocks bytes share the pool; a block id reserves one page in each. 0 if negative.
    """
    return max(available_bytes, 0) // page_bytes // layers_per_group


def blocks_per_request(
    *, attention_groups: int, state_groups: int, max_model_len: int, block_tokens: int, state_blocks: int
) -> int:
    """Blocks one full-length request takes.

    Source: kv_cache_utils.py:937-959; kv_cache_interface.py:266-271 (attention), 729-738 (state).

    Formula: attention_groups * ceil(max_model_len / block) + state_groups * state_blocks
    """
    return attention_groups * math.ceil(max_model_len / block_tokens) + state_groups * state_blocks


def state_blocks_per_sequence(*, prefix_caching: bool, num_spec: int) -> int:
    """State blocks per GDN group and sequence (MambaSpec.max_memory_usage_bytes, kv_cache_interface.py:729).

    Formula: 1 + n_spec (mamba_cache_mode none); 2 + n_spec (align, i.e. --enable-prefix-caching)
    """
    return (2 if prefix_caching else 1) + num_spec


def min_gpu_memory_utilization(
    *, capacity_bytes: int, non_kv_bytes: int, n_seqs: int, pool: VllmPool, kv_factor: int = 1
) -> float:
    """Smallest --gpu-memory-utilization holding n_seqs full-length requests (spec step 7), 2 decimals up.

    Formula: ceil(100 * (non_kv + k * n * blocks_per_request * block_bytes) / capacity) / 100; k = 2 where
    the engine halves what is left for KV (vllm-ascend's 310P worker), else 1
    """
    need = n_seqs * pool.blocks_per_request * pool.block_bytes
    return math.ceil((non_kv_bytes + kv_factor * need) / capacity_bytes * PERCENT - 1e-9) / PERCENT


def log_lines(pool: VllmPool) -> list[str]:
    """The two lines vLLM logs at start-up (kv_cache_utils.py:2224-2240)."""
    return [
        f"GPU KV cache size: {pool.kv_cache_size_tokens:,} tokens",
        f"Maximum concurrency for {pool.max_model_len_tokens:,} tokens per request: "
        f"{pool.max_concurrency:.2f}x",
    ]


def block_and_page(card: ModelCard, *, settings: PoolSettings) -> tuple[int, int]:
    """(block tokens, page bytes per layer) for the card under the settings: hybrid rule or plain rule.

    Formula (attention only): page = block * kv_tok, kv_tok = attention_bytes_per_token (bytes per token
    and layer), block = plain_block_tokens (tokens); hybrids: hybrid_block_and_page.
    """
    kv_dtype, tp = settings.kv_dtype, settings.tp
    kv_tok = attention_bytes_per_token(card, kv_dtype=kv_dtype, tp=tp)
    if card.linear_attention_layers == 0:
        block = plain_block_tokens(settings.platform, user_block_tokens=settings.user_block_tokens)
        return block, block * kv_tok
    conv_dtype = settings.conv_dtype
    return hybrid_block_and_page(
        settings,
        kv_tok=kv_tok,
        k_tok=key_bytes_per_token(card, kv_dtype=kv_dtype, tp=tp),
        conv=conv_state_bytes(card, conv_dtype=conv_dtype, tp=tp, num_spec=settings.num_spec),
        ssm=ssm_state_bytes(card, conv_dtype=conv_dtype, tp=tp),
    )


def index_page_bytes(card: ModelCard, *, settings: PoolSettings, block_tokens: int) -> int:
    """Bytes one block id reserves in the index-key caches of a GQA sparse-attention card, 0 for other cards
    (an MLA card's index page is inside attention_bytes_per_token).

    Formula: block * L_idx * x   (bytes; L_idx card.sparse_attention_layers, x indexer_key_bytes_per_layer)
    MiniMax-M3 on vllm-ascend: each sparse layer's AscendMiniMaxM3IndexerCache is its own
    AscendSFAIndexerCacheSpec (1 head of sparse_index_dim, bf16, [VA] models/minimax_m3/msa_m3.py:161-185), a
    full-attention spec with the K/V layers' block size: one uniform-type group whose block ids reserve a
    page in all of them, so the pool divides the memory by the sum of the pages.
    """
    if card.attention_traits.latent_kv or not card.is_sparse_attention:
        return 0
    x = indexer_key_bytes_per_layer(card, kv_dtype=settings.kv_dtype)
    return block_tokens * card.sparse_attention_layers * x


def compressed_pool(card: ModelCard, *, settings: PoolSettings, available_bytes: int) -> VllmPool:
    """The pool of a compressed-attention card (DeepSeek-V4, attention 'csa'), sized by its cache's bytes:
    vllm-ascend's own layout (shared pages of 16,640 and 131,072 B, patch_kv_cache_utils.py:167-213 @182b75ea)
    is not modelled, so one block holds every layer's records of `block` tokens and a sequence's windows and
    compressor states take whole blocks beside them.

    Formula: page = block * c;  per_request = ceil(max_model_len / block) + ceil(S / page);
             num_blocks = available // page
        c  csa.cache_bytes_per_token (all layers; + the MTP layer with num_spec > 0), bytes per token
        S  csa.state_bytes_per_sequence, bytes per sequence
    """
    mtp = settings.num_spec > 0
    block = plain_block_tokens(settings.platform, user_block_tokens=settings.user_block_tokens)
    page = block * csa.cache_bytes_per_token(card, kv_dtype=settings.kv_dtype, mtp=mtp)
    state_blocks = math.ceil(csa.state_bytes_per_sequence(card, mtp=mtp) / page)
    per_request = math.ceil(settings.max_model_len_tokens / block) + state_blocks
    n_blocks = blocks_in_pool(available_bytes, page_bytes=page, layers_per_group=1)
    # state_groups 0: no linear-attention group (the windows and compressor states sit in whole blocks)
    groups, blocks = (1, 1, 0), (n_blocks, per_request)
    return pool_of(settings, block=block, page=page, groups=groups, blocks=blocks, block_bytes=page)


def pool_of(
    settings: PoolSettings,
    *,
    block: int,
    page: int,
    groups: tuple[int, int, int],
    blocks: tuple[int, int],
    block_bytes: int,
) -> VllmPool:
    """The VllmPool of a cut pool: groups = (layers per group, attention groups, state groups), blocks =
    (block ids, blocks per full-length request); concurrency and the logged KV size follow from them.
    block_bytes: what one block id reserves over the pool (page * layers per group + index pages);
    mamba_cache_mode align with prefix caching on a model with state groups, else none."""
    (layers_per_group, attention_groups, state_groups), (num_blocks, per_request) = groups, blocks
    mamba: Literal["none", "align"] = "align" if settings.prefix_caching and state_groups else "none"
    concurrency = max_concurrency(num_blocks, per_request_blocks=per_request)
    return VllmPool(
        platform=settings.platform,
        block_size_tokens=block,
        page_bytes=page,
        layers_per_group=layers_per_group,
        block_bytes=block_bytes,
        attention_groups=attention_groups,
        state_groups=state_groups,
        num_blocks=num_blocks,
        blocks_per_request=per_request,
        max_concurrency=concurrency,
        kv_cache_size_tokens=kv_cache_size_tokens(concurrency, max_model_len=settings.max_model_len_tokens),
        mamba_cache_mode=mamba,
        max_model_len_tokens=settings.max_model_len_tokens,
    )


def vllm_pool(card: ModelCard, *, settings: PoolSettings, available_bytes: int) -> VllmPool:
    """The pool vLLM builds from available_bytes (per rank), spec steps 2-6 in order.

    Formula:
        (block, page) = block_and_page(card, settings=settings)      tokens, bytes per layer
        g             = group_size([n_attn, n_state])       layers per KV-cache group
        num_blocks    = max(available, 0) // page // g      block ids
        per_request   = ceil(n_attn / g) * ceil(max_model_len / block) + ceil(n_state / g) * state_blocks
        concurrency   = num_blocks / per_request            full-length requests
        n_attn        card.full_attention_layers + drafter layers; n_state card.linear_attention_layers
    Attention layers include the MTP drafter's (card.mtp_layers, qwen3_5_mtp.py:117-162) when num_spec > 0,
    or, with a separate draft model, its `draft_layers` (planner/drafts.py; the target's attention kind).
    """
    if card.attention_traits.compressed_kv:
        return compressed_pool(card, settings=settings, available_bytes=available_bytes)
    block, page = block_and_page(card, settings=settings)
    num_spec, max_model_len = settings.num_spec, settings.max_model_len_tokens
    drafter = (card.mtp_layers if num_spec else 0) if settings.draft_layers is None else settings.draft_layers
    n_attn = card.full_attention_layers + drafter
    n_state = card.linear_attention_layers
    g = group_size([n_attn, n_state]) if n_state else n_attn
    attn_groups, state_groups = math.ceil(n_attn / g), math.ceil(n_state / g)
    per_request = blocks_per_request(
        attention_groups=attn_groups,
        state_groups=state_groups,
        max_model_len=max_model_len,
        block_tokens=block,
        state_blocks=state_blocks_per_sequence(prefix_caching=settings.prefix_caching, num_spec=num_spec),
    )
    extra = index_page_bytes(card, settings=settings, block_tokens=block)
    # one block id reserves a page in each of the g layers (and in every index-key cache of MiniMax sparse
    # attention, extra): available // page // g = available // (page * g) without index pages
    block_bytes = page * g + extra
    n_blocks = blocks_in_pool(available_bytes, page_bytes=block_bytes, layers_per_group=1)
    groups, blocks = (g, attn_groups, state_groups), (n_blocks, per_request)
    return pool_of(settings, block=block, page=page, groups=groups, blocks=blocks, block_bytes=block_bytes)


def deployment_settings(
    dep: Deployment, *, max_model_len: int, prefix_caching: bool = False, num_spec: int = 0
) -> PoolSettings:
    """The pool settings of a deployment: the card's vendor picks the platform, the plan's dtypes the pages.

    --block-size reaches the pool only on CUDA for attention-only models (vllm-ascend forces 128; hybrids
    compute it); num_spec counts only when the model ships MTP layers or a draft model drafts.
    """
    platform = platform_for(dep.hardware.vendor)
    plain = dep.model.linear_attention_layers == 0
    return PoolSettings(
        platform=platform,
        kv_dtype=dep.kv_dtype,
        conv_dtype=dep.activation_dtype,
        tp=dep.tp,
        max_model_len_tokens=max_model_len,
        prefix_caching=prefix_caching,
        num_spec=num_spec if dep.model.mtp_layers or dep.draft_method else 0,
        user_block_tokens=dep.block_size_tokens if plain and platform == "cuda" else None,
        draft_layers=dep.draft_layers if dep.draft_method else None,
    )


def deployment_block_tokens(dep: Deployment) -> int:
    """The block size vLLM runs the deployment at (tokens): the hybrid rule for GDN models (a prefix-cache hit
    is a whole number of these blocks), 128 on vllm-ascend otherwise (block_and_page). A separate draft
    model's drafts do not widen the conv state here (num_spec 0 without MTP layers)."""
    num_spec = dep.mtp_tokens if dep.model.mtp_layers else 0
    block, _ = block_and_page(
        dep.model, settings=deployment_settings(dep, max_model_len=dep.ctx_tokens, num_spec=num_spec)
    )
    return block


def deployment_pool(
    dep: Deployment,
    *,
    available_bytes: int,
    max_model_len: int,
    prefix_caching: bool = False,
    num_spec: int = 0,
) -> VllmPool:
    """vLLM's pool for a deployment (deployment_settings) from available_bytes per rank."""
    settings = deployment_settings(
        dep, max_model_len=max_model_len, prefix_caching=prefix_caching, num_spec=num_spec
    )
    return vllm_pool(dep.model, settings=settings, available_bytes=available_bytes)
