"""Speculative decoding as a user of vLLM describes it: --speculative-config's method and
num_speculative_tokens, and the draft acceptance rate vLLM logs; turned into what the Deployment carries
(method, k drafts, kvplan's per-draft chained acceptance). The acceptance arithmetic lives here, below the
step model (planner/perf/mtp.py re-exports it), so the flags and the step model share one implementation.
"""

from __future__ import annotations

from planner.deployment import (
    DEFAULT_MTP_ACCEPTANCE_FRACTION,
    MAX_SPECULATIVE_TOKENS,
    SPECULATIVE_METHODS,
)
from planner.errors import PlanInputError

# --speculative-config keys kvplan reads; "model" names the draft checkpoint (kvplan sizes the draft from
# planner/drafts.py's shapes, not from the checkpoint), the rest of vLLM's keys do not change the cost model.
SPECULATIVE_CONFIG_KEYS = ("method", "num_speculative_tokens", "model")
CONFIG_FLAG = "--speculative-config"
EXAMPLE = '{"method": "eagle3", "num_speculative_tokens": 3}'


def speculative_tokens_per_step(draft_tokens: int, *, acceptance_fraction: float) -> float:
    """Expected tokens a sequence emits per verify step with k draft tokens of acceptance a each.

    Formula: sum_{i=0..k} a^i = 1 + a + ... + a^k   (the verified token always counts; draft i is kept
    only when drafts 1..i all are, acceptances independent). Bounded by 1 + k; equals 1 when k = 0.
    Seed 002 (Qwen3.5-0.8B, 1 draft, 89.6 %): 1 + 0.896 = 1.896, the reported 1.90 tokens/step.
    """
    return float(sum(acceptance_fraction**i for i in range(draft_tokens + 1)))


def chained_acceptance(draft_tokens: int, *, accepted_share: float) -> float:
    """Per-draft acceptance a (speculative_tokens_per_step's) giving the tokens per step that a share of
    drafted tokens accepted gives.

    vLLM's spec-decode metrics report the draft acceptance rate as accepted / drafted tokens, so its mean
    acceptance length is 1 + k * share ("Avg Draft acceptance rate" = num_accepted_tokens / num_draft_tokens,
    "Mean acceptance length" = 1 + num_accepted_tokens / num_drafts: vllm-project/vllm
    vllm/v1/spec_decode/metrics.py, SpecDecodingLogging.log @ee4ceaae), while the chained a keeps draft i
    only when drafts 1..i are kept. Qwen3.8-27B with 3 drafts at 64.2 % (corpus line
    171): mean length 2.93 as published, where reading 0.642 as a gives 2.32.

    Formula: solve a + a^2 + ... + a^k = k * share for a in [0, 1] (increasing in a: bisection to 1e-12).
    k = 1: a = share; share = 1: a = 1.
    """
    if draft_tokens <= 1 or accepted_share >= 1.0:
        return accepted_share
    target = draft_tokens * accepted_share
    low, high = 0.0, 1.0
    while high - low > 1e-12:
        mid = (low + high) / 2.0
        if speculative_tokens_per_step(draft_tokens, acceptance_fraction=mid) - 1.0 < target:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def config_object(text: str) -> dict[str, object]:
    """The --speculative-config JSON object with only SPECULATIVE_CONFIG_KEYS, or PlanInputError."""
    import json  # here: a plan without --speculative-config (the mission command) never loads json

    def once(pairs: list[tuple[str, object]]) -> dict[str, object]:
        keys = [key for key, _ in pairs]
        twice = next((key for key in keys if keys.count(key) > 1), None)
        if twice is not None:
            raise PlanInputError(
                f"{CONFIG_FLAG}: key {twice!r} given twice (got {text!r}, expected each key once)"
            )
        return dict(pairs)

    try:
        config = json.loads(text, object_pairs_hook=once)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise PlanInputError(f"{CONFIG_FLAG}: not JSON (got {text!r}, expected e.g. {EXAMPLE})") from exc
    if not isinstance(config, dict):
        raise PlanInputError(f"{CONFIG_FLAG}: not a JSON object (got {text!r}, expected e.g. {EXAMPLE})")
    unknown = sorted(set(config) - set(SPECULATIVE_CONFIG_KEYS))
    if unknown:
        raise PlanInputError(
            f"{CONFIG_FLAG}: unknown key {unknown[0]!r} (expected {', '.join(SPECULATIVE_CONFIG_KEYS)})"
        )
    return config


def draft_model(text: str | None) -> str | None:
    """The "model" of a --speculative-config (the draft checkpoint, path or repo; None when absent or no
    flag), or PlanInputError when it is not a non-empty string or holds a NUL (no path or argv can: the
    printed launch command would not run)."""
    found = None if text is None else config_object(text).get("model")
    if found is not None and (not isinstance(found, str) or not found.strip() or "\x00" in found):
        raise PlanInputError(
            f"{CONFIG_FLAG}: model is not a checkpoint path or repo (got {found!r}, expected a non-empty "
            "string without NUL, e.g. a draft repo)"
        )
    return found


# vLLM's SpeculativeConfig turns a model's own MTP method name (deepseek_mtp, qwen3_next_mtp, mimo_mtp,
# glm4_moe_mtp, ernie_mtp, ...: its MTP_MODEL_TYPES) into "mtp" (vllm/config/speculative.py), so kvplan
# reads every "<model>_mtp" as the card's MTP layers.
MTP_METHOD_SUFFIX = "_mtp"


def parsed_speculative_config(text: str) -> tuple[str, int]:
    """(method, num_speculative_tokens) of a vLLM --speculative-config JSON object, or PlanInputError."""
    config = config_object(text)
    method, tokens = config.get("method"), config.get("num_speculative_tokens")
    if isinstance(method, str) and method.endswith(MTP_METHOD_SUFFIX):
        method = "mtp"  # deepseek_mtp, qwen3_next_mtp, glm4_moe_mtp...: vLLM takes them as "mtp"
    if method not in SPECULATIVE_METHODS:
        raise PlanInputError(
            f"{CONFIG_FLAG}: method not modelled (got {method!r}, expected one of "
            f"{', '.join(SPECULATIVE_METHODS)})"
        )
    if not isinstance(tokens, int) or isinstance(tokens, bool) or not 1 <= tokens <= MAX_SPECULATIVE_TOKENS:
        raise PlanInputError(
            f"{CONFIG_FLAG}: num_speculative_tokens out of range (got {tokens!r}, "
            f"expected 1..{MAX_SPECULATIVE_TOKENS})"
        )
    return method, tokens


def speculation(
    *, mtp: int, mtp_acceptance: float | None, speculative_config: str | None, acceptance_rate: float | None
) -> tuple[str, int, float]:
    """(method, k drafts, per-draft chained acceptance a) from the flags.

    --mtp k keeps its meaning (the card's MTP layers, --mtp-acceptance = a); --speculative-config gives
    vLLM's method and k. --acceptance-rate is vLLM's "Avg Draft acceptance rate" (accepted / drafted
    tokens), converted by chained_acceptance so that tokens per step = 1 + k * rate; without it, a =
    --mtp-acceptance (None: not given, DEFAULT_MTP_ACCEPTANCE_FRACTION) for --mtp and a draft model alike;
    both acceptance flags at once are refused, the default value typed too.
    """
    if speculative_config is not None and mtp:
        raise PlanInputError(
            f"--mtp: give the drafts once (got --mtp {mtp} and {CONFIG_FLAG}, expected one of them)"
        )
    if acceptance_rate is not None and not 0 <= acceptance_rate <= 1:
        raise PlanInputError(f"--acceptance-rate: out of range (got {acceptance_rate}, expected in [0, 1])")
    method, drafts = (
        ("mtp", mtp) if speculative_config is None else parsed_speculative_config(speculative_config)
    )
    if acceptance_rate is not None and not drafts:
        raise PlanInputError(
            f"--acceptance-rate: no speculative decoding to apply it to (got {acceptance_rate}, "
            f"expected with --mtp N or {CONFIG_FLAG})"
        )
    if acceptance_rate is not None and mtp_acceptance is not None:
        raise PlanInputError(
            f"--acceptance-rate: give the acceptance once (got --acceptance-rate {acceptance_rate:g} and "
            f"--mtp-acceptance {mtp_acceptance:g}, expected one of them)"
        )
    if acceptance_rate is not None:
        return method, drafts, chained_acceptance(drafts, accepted_share=acceptance_rate)
    return method, drafts, DEFAULT_MTP_ACCEPTANCE_FRACTION if mtp_acceptance is None else mtp_acceptance
