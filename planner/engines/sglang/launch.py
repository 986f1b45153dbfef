"""`python -m sglang.launch_server` arguments for a plan (pure): the plan in SGLang's own flag names.

Mapping (server_args.py flag names; docs/engines/sglang.md):
  --tp-size T*D --dp-size D --enable-dp-attention   kvplan's --tp T --dp D (D > 1: attention DP in one group)
  --ep-size E                                        --ep E (MoE experts over the group)
  --pp-size P                                        --pp P
  --mem-fraction-static f                            the plan's memory fraction (SGLang's formula by default)
  --context-length ctx                               --ctx (tokens per request)
  --chunked-prefill-size C                           the plan's prefill tokens per pass (the card's default)
  --max-running-requests R                           the plan's batch x D (SGLang gives each DP rank R // D)
  --page-size 128                                    Ascend's default, written so the pool is the planned one
  --attention-backend ascend --device npu            on Ascend ([NPU] set_default_server_args forces ascend)
  --quantization modelslim                           int8 (W8A8) weights: an msModelSlim checkpoint
  --speculative-algorithm NEXTN | EAGLE3 ...         --mtp k (the model's MTP layers) or an eagle3 draft model
  --disable-radix-cache                              without --prefix-cache or --prefix-cached-fraction
"""

from __future__ import annotations

import shlex

from planner.deployment import Deployment
from planner.engines import checkpoints, common
from planner.engines.common import Lengths, ServingOptions
from planner.engines.sglang import defaults, flags
from planner.results import Plan
from planner.schema import Frozen

KV_CACHE_DTYPES = {"fp8": "fp8_e4m3"}  # other KV dtypes: auto (the model's dtype)
QUANTIZATION = {"int8": "modelslim"}  # W8A8 on Ascend: an msModelSlim checkpoint (--quantization modelslim)
DRAFT_PLACEHOLDER = "<draft model dir>"


class SglangLaunch(Frozen):
    """`python -m sglang.launch_server --model-path <model> <args>`; value None is a bare flag."""

    model: str
    args: list[tuple[str, str | None]]
    notes: list[str]


def speculative_words(
    dep: Deployment, *, drafts: int, draft_model: str | None
) -> list[tuple[str, str | None]]:
    """EAGLE-family speculation with chain drafting (topk 1): NEXTN for the model's MTP layers, EAGLE3 for
    a draft model (--speculative-config's "model", else a placeholder); num_draft_tokens = steps + 1."""
    if not drafts:
        return []
    algorithm = "EAGLE3" if dep.draft_method == "eagle3" else "NEXTN"
    words: list[tuple[str, str | None]] = [("--speculative-algorithm", algorithm)]
    if algorithm == "EAGLE3":
        words.append(("--speculative-draft-model-path", draft_model or DRAFT_PLACEHOLDER))
    words += [("--speculative-num-steps", str(drafts)), ("--speculative-eagle-topk", "1")]
    return [*words, ("--speculative-num-draft-tokens", str(drafts + 1))]


def launch_args(plan: Plan, dep: Deployment, *, lengths: Lengths, options: ServingOptions) -> SglangLaunch:
    """The launch command of the plan at the request lengths (`kvplan sglang`)."""
    sizing = flags.plan_words(plan, dep, ctx_tokens=lengths.max_seq_len_tokens)
    args: list[tuple[str, str | None]] = [*flags.layout_words(dep), *sizing]
    if defaults.is_npu(dep.hardware):
        args += [("--attention-backend", "ascend"), ("--device", "npu")]
    quantization = QUANTIZATION.get(plan.dtype) if defaults.is_npu(dep.hardware) else None
    args += [("--quantization", quantization)] if quantization else []
    kv = KV_CACHE_DTYPES.get(plan.kv_dtype)
    args += [("--kv-cache-dtype", kv)] if kv else []
    args += speculative_words(
        dep, drafts=options.mtp or dep.speculative_tokens, draft_model=options.draft_model
    )
    args += [("--served-model-name", options.model_name)] if options.model_name else []
    args += [("--trust-remote-code", None)] if dep.model.trust_remote_code else []
    # the radix cache stays on (SGLang's default) where the plan counts prefix-cache hits
    radix_cache = options.prefix_cache or dep.prefix_cached_fraction > 0
    args += [] if radix_cache else [("--disable-radix-cache", None)]
    placeholder = dep.draft_method == "eagle3" and options.draft_model is None
    notes = [f"SGLang's draft model: replace {DRAFT_PLACEHOLDER}"] if placeholder else []
    return SglangLaunch(model=served_model(plan, dep, options), args=args, notes=notes)


def served_model(plan: Plan, dep: Deployment, options: ServingOptions) -> str:
    """--model-path: --weights-path, else the repo whose weights are the plan's dtype (engines/checkpoints.py:
    the card's own repo for its released dtype, a listed quantized one); PlanInputError when none is known."""
    if options.weights_path:
        return options.weights_path
    return checkpoints.known_checkpoint(dep.model, scheme=plan.dtype, alias=dep.model_alias).repo


def render_command(result: SglangLaunch) -> str:
    """A copy-pasteable shell command, one argument per line."""
    return common.shell_command(f"{flags.MODULE} --model-path {shlex.quote(result.model)}", result.args)
