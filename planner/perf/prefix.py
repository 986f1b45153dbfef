"""The prefix cache's hit: how many of a prompt's tokens an engine finds already computed.

A leaf module (math only) so that the step model (planner/perf/roofline.py) and the simulator's engine
(planner/sim/engine.py) share the one implementation without lengthening either's import chain.
"""

from __future__ import annotations

import math


def prefix_hit_tokens(prompt_tokens: int, *, cached_fraction: float, block_tokens: int) -> int:
    """Prompt tokens a prefix-cache lookup finds already computed (vLLM v1
    KVCacheManager.get_computed_blocks: whole blocks only, and never the last prompt token, which is
    recomputed for its logits: max_cache_hit_length = num_tokens - 1).

    Formula: h = B * min(floor(floor(f * I) / B), floor((I - 1) / B))
        I  prompt tokens;  f  share of the prompt that is in the cache (a shared prefix)
        B  tokens per cache block (registry.prefix_cache_block_tokens)
    Returns tokens (0 when f = 0). roofline.cached_prompt_tokens applies it to a deployment, the simulator
    (planner/sim/engine.py) to each request.
    """
    shared_tokens = math.floor(cached_fraction * prompt_tokens)
    return block_tokens * min(shared_tokens // block_tokens, (prompt_tokens - 1) // block_tokens)
