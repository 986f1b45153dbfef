"""What every engine's serving config shares (engine-neutral): the request lengths and the served model.

MindIE (planner/engines/mindie/) and vLLM (planner/engines/vllm/args.py) both size the plan with these
lengths, so their configs describe the same deployment.
"""

import math
import shlex
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt
from pydantic import Field, field_validator

from planner import deployment, memory, units
from planner.deployment import DEFAULT_MAX_PREFILL_TOKENS, Deployment
from planner.errors import PlanInputError
from planner.results import MemoryBreakdown
from planner.schema import BUILT_ON_FIRST_USE, Frozen, HardwareProfile


class ServingOptions(Frozen):
    """What the user asked of a serving config beyond the plan. None: kvplan's default."""

    model_config = BUILT_ON_FIRST_USE

    weights_path: str | None = None
    model_name: str | None = None
    max_input_tokens: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_prefill_tokens: int | None = Field(default=None, ge=1)
    mtp: int = Field(default=0, ge=0)  # MTP drafts (--mtp, or --speculative-config's method mtp): with_drafts
    prefix_cache: bool = False
    draft_model: str | None = None  # --speculative-config's "model": the draft checkpoint (eagle3, dflash)
    trust_remote_code: bool = False  # the model card's: the checkpoint needs its own code (with_drafts)

    @field_validator("model_name", "weights_path")
    @classmethod
    def _one_word(cls, text: str | None) -> str | None:
        """A served name or checkpoint path prints as one shell word that no engine reads as a flag (vLLM's
        argparse takes a leading '-' for an option: `vllm serve -h`); MindIE's stricter modelName rule is
        checked with its config (rules.py)."""
        if text is not None and (text.startswith("-") or not text.isprintable()):
            raise ValueError("printable, not starting with '-' (a command would read it as a flag)")
        return text


Options = TypeVar("Options", bound=ServingOptions)  # ServingOptions or an engine's own (MindieOptions)


def with_drafts(options: Options, dep: Deployment) -> Options:
    """`options` with the deployment's speculative decoding: mtp = its MTP drafts (from --mtp or from
    --speculative-config's method mtp; 0 when a separate draft model drafts, or none), so an engine's
    config writes the drafts the plan was sized with; and the card's trust_remote_code."""
    return options.model_copy(
        update={"mtp": dep.mtp_drafts, "trust_remote_code": dep.model.trust_remote_code}
    )


class Lengths(Frozen):
    """Token limits of one request: in + out <= max_seq_len; max_prefill >= input unless forced lower."""

    model_config = BUILT_ON_FIRST_USE

    max_seq_len_tokens: int
    max_input_tokens: int
    max_output_tokens: int
    max_prefill_tokens: int


class LengthRules(Frozen):
    """An engine's own rules for the request lengths (resolve_lengths); the defaults: none.

    engine_prefill_tokens: the engine's default prefill budget in tokens where it chunks prompts (vLLM's
    --max-num-batched-tokens: registry.default_prefill_tokens); at_least_input: a smaller prefill budget is
    raised to the input tokens (MindIE: registry.prefill_at_least_input); input_limit: the longest prompt
    in tokens the engine's config takes (registry.prompt_token_limit).
    """

    model_config = BUILT_ON_FIRST_USE

    engine_prefill_tokens: int | None = None
    at_least_input: bool = False
    input_limit: int | None = None


def resolve_lengths(
    ctx_tokens: int, *, block_size_tokens: int, options: ServingOptions, rules: LengthRules | None = None
) -> Lengths:
    """Split --ctx into input and output: output defaults to ctx/4 (whole blocks), input to the rest.

    maxPrefillTokens defaults to max(8192, input) so MindIE's rule maxPrefillTokens >= maxInputTokenLen
    holds (with the default split this is deployment.default_max_prefill_tokens, what the plan sizes); an
    engine that chunks prompts passes its own default as rules.engine_prefill_tokens; an explicit
    --max-prefill-tokens is kept as given, raised to the input where rules.at_least_input
    (raised_prefill_notes says so). rules.input_limit is checked against a given --max-input-tokens.
    """
    rules = rules or LengthRules()
    input_limit = rules.input_limit
    out_tokens, in_tokens = options.max_output_tokens, options.max_input_tokens
    if input_limit is not None and in_tokens is not None and in_tokens > input_limit:
        raise PlanInputError(
            f"--max-input-tokens: the engine's maxInputTokenLen is at most {input_limit} tokens (got "
            f"{in_tokens}, expected <= {input_limit})"
        )
    for flag, given in (("--max-input-tokens", in_tokens), ("--max-output-tokens", out_tokens)):
        if given is not None and given >= ctx_tokens:
            raise PlanInputError(
                f"{flag}: {given} leaves no room in --ctx {ctx_tokens} for the other part (expected < "
                f"{ctx_tokens}); raise --ctx or lower {flag}"
            )
    if out_tokens is None and in_tokens is None:
        out_tokens = deployment.default_output_tokens(ctx_tokens, block_size_tokens=block_size_tokens)
    in_tokens = in_tokens if in_tokens is not None else ctx_tokens - (out_tokens or 0)
    out_tokens = out_tokens if out_tokens is not None else ctx_tokens - in_tokens
    if in_tokens < 1 or out_tokens < 1 or in_tokens + out_tokens > ctx_tokens:
        raise PlanInputError(
            f"--max-input-tokens/--max-output-tokens: input + output must fit in --ctx with both >= 1 "
            f"(got {in_tokens} + {out_tokens}, expected a sum <= {ctx_tokens})"
        )
    prefill = (
        options.max_prefill_tokens
        or rules.engine_prefill_tokens
        or max(DEFAULT_MAX_PREFILL_TOKENS, in_tokens)
    )
    if rules.at_least_input:
        prefill = max(prefill, in_tokens)
    return Lengths(
        max_seq_len_tokens=ctx_tokens,
        max_input_tokens=in_tokens,
        max_output_tokens=out_tokens,
        max_prefill_tokens=prefill,
    )


def sized_deployment(
    dep: Deployment, *, options: ServingOptions, rules: LengthRules | None = None
) -> tuple[Deployment, Lengths]:
    """(dep re-sized with the engine's lengths, the lengths): maxPrefillTokens drives the activation peak;
    rules as in resolve_lengths."""
    lengths = resolve_lengths(
        dep.ctx_tokens, block_size_tokens=dep.block_size_tokens, options=options, rules=rules
    )
    return dep.model_copy(update={"max_prefill_tokens": lengths.max_prefill_tokens}), lengths


def raised_prefill_notes(given: int | None, *, used: int) -> list[str]:
    """The note when --max-prefill-tokens `given` was raised to `used` tokens, the input part of --ctx
    (resolve_lengths' rules.at_least_input; the plan's inputs.to_deployment): empty when it was not."""
    if given is None or used <= given:
        return []
    return [
        f"--max-prefill-tokens {given} raised to {used} (maxInputTokenLen): MindIE requires maxPrefillTokens "
        f">= maxInputTokenLen; the config writes {used} and the activation peak is sized for it"
    ]


IntOrArray = int | npt.NDArray[np.int64]


class EngineBudget(Frozen):
    """An engine's own start-up arithmetic for the KV budget of one rank (bytes), where kvplan models it
    (vLLM: planner/engines/vllm/startup.py plan_budget): the activation peak the engine profiles, what
    else it holds back (non-torch memory, graph estimate, cleared memory, 310P's halving) and the KV memory
    left: kv_budget = usable - weights - activation - runtime."""

    model_config = BUILT_ON_FIRST_USE

    activation_bytes: int
    runtime_bytes: int
    kv_budget_bytes: int


def name_candidates(typed: str, *, card_id: str) -> tuple[str, ...]:
    """Served names to try for --model as typed, in order: the text (unless it names a card file), its last
    path part less a card file's .yaml / .yml ending, the card's id."""
    text = typed.strip()
    last = text.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    if last.lower().endswith((".yaml", ".yml")):
        return last.rsplit(".", 1)[0], card_id
    return text, last, card_id


class BlockPool(Frozen):
    """A KV block pool as the simulator counts it: blocks of block_tokens, the extra blocks one sequence
    holds for its fixed recurrent state while admitted, and the slots a decoding sequence keeps free past its
    last token for its speculative drafts (lookahead_tokens; 0 without drafts), up to slot_cap_tokens where
    the engine allocates no slot past a length (vLLM: max_model_len; None: no cap)."""

    model_config = BUILT_ON_FIRST_USE

    total_blocks: int
    state_blocks: int
    block_tokens: int
    lookahead_tokens: int = 0
    slot_cap_tokens: int | None = None

    def sequence_blocks(self, tokens: int) -> int:
        """Blocks a decoding sequence of `tokens` tokens holds: ceil(min(tokens + lookahead, cap) / block) +
        state (cap = slot_cap_tokens, none when None)."""
        slots = tokens + self.lookahead_tokens
        if self.slot_cap_tokens is not None:
            slots = min(slots, max(self.slot_cap_tokens, tokens))
        return -(-slots // self.block_tokens) + self.state_blocks


def kv_bound_grid(
    dep: Deployment, mem: MemoryBreakdown, *, ctx_tokens: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Most sequences of each ctx the KV budget holds, engine-neutral: floor(kv_budget / per_sequence), 0
    for a negative budget; per_sequence = memory.sequence_bytes(ctx) with the plan's KV bytes per token
    (pp and MTP included) and state."""
    per_sequence = memory.sequence_bytes(
        ctx_tokens,
        kv_bytes_per_token=mem.kv_bytes_per_token,
        state_bytes=mem.state_bytes_per_sequence,
        block_size_tokens=dep.block_size_tokens,
    )
    most: npt.NDArray[np.int64] = np.maximum(mem.kv_budget_bytes, 0) // per_sequence
    return most


def plain_block_pool(dep: Deployment, mem: MemoryBreakdown) -> BlockPool:
    """Whole blocks of the budget, state as whole blocks per sequence: ceil(state / block_bytes)."""
    block_bytes = dep.block_size_tokens * mem.kv_bytes_per_token
    return BlockPool(
        total_blocks=max(mem.kv_budget_bytes, 0) // block_bytes,
        state_blocks=-(-mem.state_bytes_per_sequence // block_bytes),
        block_tokens=dep.block_size_tokens,
    )


def check_experts_over_whole_group(dep: Deployment, *, splits: str) -> None:
    """PlanInputError unless ep is 1 or tp x dp: an engine whose expert parallelism splits the experts over
    every rank of the group (vLLM's --enable-expert-parallel, SGLang's --ep-size); `splits` words its rule."""
    group = dep.tp * dep.dp
    if dep.ep not in (1, group):
        raise PlanInputError(f"--ep: {splits} (got {dep.ep}, expected 1 or {group})")


def whole_group_expert_degrees(group: int, *, candidates: list[int]) -> list[int]:
    """Expert-parallel degrees such an engine runs on a MoE group of `group` ranks: 1 or all of them."""
    return sorted({1, group})


def own_budget(dep: Deployment, *, weights_bytes: int) -> EngineBudget | None:
    """None: the plan's KV budget is kvplan's own formula (capacity.memory_breakdown), for an engine that
    sizes no pool of its own at start-up (MindIE, transformers)."""
    return None


def one_pass_prefill(hardware: HardwareProfile) -> int | None:
    """None: the plan's default max(8192, ctx - output), for an engine that prefills a prompt in one pass."""
    return None


def constant_memory_fraction(value: float) -> Callable[..., float]:
    """default_memory_fraction_at of an engine whose memory setting is one constant, whatever the
    deployment (MindIE's NPU_MEMORY_FRACTION, transformers')."""

    def default_memory_fraction_at(
        hardware: HardwareProfile, *, ranks: tuple[int, int, int], prefill_tokens: int | None, drafting: bool
    ) -> float:
        return value

    return default_memory_fraction_at


def shell_command(head: str, args: Sequence[tuple[str, str | None]]) -> str:
    """A copy-pasteable shell command: `head`, then one argument per line (flag, shell-quoted value)."""
    lines = [head]
    for flag, value in args:
        lines.append(f"  {flag}" + (f" {shlex.quote(value)}" if value is not None else ""))
    return " \\\n".join(lines)


def ascend_fp32_refusal(dep: Deployment, *, refusal: str) -> str | None:
    """`refusal` (the engine's one-line reason) when dep runs fp32 weights on an Ascend card, else None: the
    engines whose NPU paged-KV ops take 16-bit only (vllm-ascend, SGLang) share this rule."""
    if dep.weight_scheme_name != "fp32" or dep.hardware.vendor != "huawei":
        return None
    return refusal


def logged_total_figures(hw: HardwareProfile, total_bytes: int) -> dict[str, float | int | None]:
    """The card figures an engine's logged device total sets (MindIE's and vLLM's start-up logs alike):
    visible_memory_bytes := the total the runtime reported (bytes); variant := None (a listed SKU's figures
    no longer hold); memory_capacity_gib := the total in GiB rounded up to 1e-6, only where it exceeds the
    nominal (else the nominal stays, and is left out here)."""
    figures: dict[str, float | int | None] = {"visible_memory_bytes": total_bytes, "variant": None}
    total_gib = math.ceil(units.bytes_to_gib(total_bytes) * 1e6) / 1e6
    if total_gib > hw.memory_capacity_gib:
        figures["memory_capacity_gib"] = total_gib
    return figures
