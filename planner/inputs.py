"""Turn what a user typed (CLI flags, dashboard widgets) into a validated Deployment. Every failure is a
PlanInputError (or UnknownIdError / DataFileError) whose message starts with the flag."""

import math
from typing import NamedTuple

from pydantic import Field

from planner import catalog, deployment, units
from planner.degrees import DEGREES, MAX_DEGREE, carried
from planner.deployment import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    MAX_REDUNDANT_EXPERTS,
    Deployment,
)
from planner.dtypes import WEIGHT_SCHEMES, StorageDType, activation_dtype_of, storage_dtype, weight_scheme
from planner.engines import registry
from planner.errors import PlanInputError
from planner.kinds import DEFAULT_ENGINE, MIN_CTX_TOKENS, EngineName, parse_engine
from planner.records import record, replace
from planner.schema import Frozen, HardwareProfile, ModelCard
from planner.speculation import speculation

DEFAULT_CARD = "ascend-950pr"
DEFAULT_DTYPE = AUTO_DTYPE = "auto"  # --dtype's default: the card's 16-bit dtype (weight_dtype_on)
DEFAULT_CTX = "4k"


class ServiceLevels(Frozen):
    """Latency targets for the SLO search (planner/plan/compose.py); None means unconstrained."""

    tpot_s: float | None = Field(default=None, gt=0)
    ttft_s: float | None = Field(default=None, gt=0)
    min_user_tokens_per_s: float | None = Field(default=None, gt=0)

    @property
    def any(self) -> bool:
        """True when at least one target is set."""
        return any(v is not None for v in (self.tpot_s, self.ttft_s, self.min_user_tokens_per_s))


@record
class PlanRequest:
    """Raw user choices; strings are parsed by to_deployment()."""

    model: str
    card: str = DEFAULT_CARD
    dtype: str = DEFAULT_DTYPE
    kv_dtype: str | None = None
    tp: int = 1
    ctx: str = DEFAULT_CTX
    batch: int | None = None
    block_size: int = DEFAULT_BLOCK_SIZE_TOKENS
    memory_fraction: float | None = None  # None: the engine's own (registry.deployment_memory_fraction)
    memory_gib: float | None = None
    bandwidth_gbps: float | None = None
    max_prefill_tokens: int | None = None  # None: deployment.default_max_prefill_tokens, as the configs write
    mtp: int = 0
    mtp_acceptance: float | None = None  # None: not given, DEFAULT_MTP_ACCEPTANCE_FRACTION (speculation)
    speculative_config: str | None = None  # vLLM's --speculative-config JSON (method, num_speculative_tokens)
    acceptance_rate: float | None = None  # vLLM's logged draft acceptance rate: accepted / drafted tokens
    calibrated: bool = True
    engine: str = DEFAULT_ENGINE
    dp: int = 1
    ep: int = 1
    pp: int = 1
    nodes: int | None = None
    devices_per_node: int | None = None
    redundant_experts: int = 0
    prefix_cached_fraction: float = 0.0  # share of each prompt in the prefix cache (serve, simulate)


# The request's fields that reach the Deployment as they are (same name, same value): the layout, --batch and
# --uncalibrated.
REQUEST_ECHOES = (
    *DEGREES,
    "nodes",
    "devices_per_node",
    "redundant_experts",
    "batch",
    "calibrated",
    "prefix_cached_fraction",
)


def parse_ctx(text: str, *, flag: str = "--ctx") -> int:
    """Token count from a flag value, or PlanInputError naming the flag, the value and the accepted form."""
    try:
        return units.parse_tokens(str(text))
    except ValueError as exc:
        raise PlanInputError(f"{flag}: not a token count (got {text!r}, {exc})") from exc


def parse_context(text: str, *, flag: str = "--ctx") -> int:
    """A context length (--ctx) from a flag value: parse_ctx, and at least kinds.MIN_CTX_TOKENS (one input and
    one output token), or PlanInputError naming the flag, the value and the limit."""
    tokens = parse_ctx(text, flag=flag)
    if tokens < MIN_CTX_TOKENS:
        raise PlanInputError(
            f"{flag}: a context holds at least 1 input and 1 output token (got {tokens}, expected >= "
            f"{MIN_CTX_TOKENS})"
        )
    return tokens


def weight_dtype_on(text: str, *, hardware: HardwareProfile) -> str:
    """parse_weight_scheme, with auto (the default) read as the card's 16-bit dtype (activation_dtype)."""
    return hardware.activation_dtype if text.strip().lower() == AUTO_DTYPE else parse_weight_scheme(text)


def parse_weight_scheme(text: str) -> str:
    """Canonical weight-scheme name, or PlanInputError listing the accepted ones."""
    try:
        return weight_scheme(text).name
    except KeyError:
        raise PlanInputError(
            f"--dtype: unknown weight dtype (got {text!r}, expected one of "
            f"{', '.join([AUTO_DTYPE, *WEIGHT_SCHEMES])})"
        ) from None


def parse_kv_dtype(text: str | None, *, default: StorageDType) -> StorageDType:
    """KV dtype from a flag (None: the activation dtype, as vLLM's 'auto' and MindIE without KV quant)."""
    if text is None or text.lower() == "auto":
        return default
    try:
        kv = storage_dtype(text)
    except ValueError:
        kv = None
    if kv is None or (kv is StorageDType.fp32 and default is not StorageDType.fp32):
        raise PlanInputError(
            f"--kv-dtype: unknown KV dtype (got {text!r}, expected auto, bf16, fp16, fp8 or int8; "
            f"fp32 only with --dtype fp32)"
        )
    return kv


MEMORY_GIB_RANGE = (1 / 1024, 2.0**20)  # 1 MiB .. 1 PiB of device memory
BANDWIDTH_GBPS_RANGE = (1e-3, 1e7)  # 1 MB/s .. 10 PB/s
MAX_BATCH = 10**6
MAX_PREFILL_TOKENS = units.MAX_TOKENS
# --memory-fraction's floor: the runtime reserve alone takes 0.94-3.3 % of every catalogued card (0.6 GiB of a
# 64 GiB 910B .. 1.6 GiB of a 48 GiB Atlas 300I Duo, hwprofiles/*.yaml runtime_overhead_gib), so below 1 % no
# card leaves anything for weights and KV: a typo (1e-300, 0.0008 for 0.8), refused like 0
MIN_MEMORY_FRACTION = 0.01


def bounded(value: float, flag: str, limits: tuple[float, float]) -> float:
    """`value` when finite and within [low, high], else PlanInputError naming the flag, value and range."""
    low, high = limits
    if not low <= value <= high:  # NaN fails both comparisons
        raise PlanInputError(
            f"{flag}: out of range (got {value}, expected a finite number in [{low:g}, {high:g}])"
        )
    return value


def check_batch(value: int | None, flag: str) -> None:
    """A batch flag (the plan's --batch, serve's and simulate's --max-batch: max_num_seqs, maxBatchSize)
    within 1..MAX_BATCH sequences: the one range every command checks, naming the flag as given."""
    if value is not None and not 1 <= value <= MAX_BATCH:
        raise PlanInputError(f"{flag}: out of range (got {value}, expected 1..{MAX_BATCH})")


def positive(value: float | None, flag: str) -> float | None:
    """`value` when None or > 0, else PlanInputError naming the flag."""
    if value is not None and not value > 0:
        raise PlanInputError(f"{flag}: must be > 0 (got {value})")
    if value is not None and not value < math.inf:
        raise PlanInputError(f"{flag}: must be finite (got {value})")
    return value


def ms_to_s(value: float | None, flag: str) -> float | None:
    """A millisecond flag (None or > 0) in seconds."""
    checked = positive(value, flag)
    return None if checked is None else checked * units.MS_S


def apply_overrides(
    hw: HardwareProfile, *, memory_gib: float | None, bandwidth_gbps: float | None
) -> HardwareProfile:
    """Card profile with the user's capacity / bandwidth overrides (validated again as a whole)."""
    update: dict[str, float | None] = {}
    if memory_gib is not None:
        # --memory-gib is the device total the planner sizes from: a custom size, no longer a listed variant
        update["memory_capacity_gib"] = bounded(memory_gib, "--memory-gib", MEMORY_GIB_RANGE)
        update["visible_memory_bytes"] = None
        update["variant"] = None
    if bandwidth_gbps is not None:
        update["memory_bandwidth_gb_per_s"] = bounded(
            bandwidth_gbps, "--bandwidth-gbps", BANDWIDTH_GBPS_RANGE
        )
    if not update:
        return hw
    return HardwareProfile.model_validate({**hw.model_dump(), **update})


def _check_ranges(req: PlanRequest) -> None:
    checks = [
        ("--tp", req.tp, 1 <= req.tp <= 64, "1..64"),
        ("--batch", req.batch, req.batch is None or 1 <= req.batch <= MAX_BATCH, f"1..{MAX_BATCH}"),
        (
            "--block-size",
            req.block_size,
            1 <= req.block_size <= 1024,
            "1..1024 (MindIE: <= 128, multiple of 16)",
        ),
        (
            "--memory-fraction",
            req.memory_fraction,
            req.memory_fraction is None or MIN_MEMORY_FRACTION <= req.memory_fraction <= 1,
            f"in [{MIN_MEMORY_FRACTION:g}, 1]: below 1 % the runtime reserve alone fills the card",
        ),
        (
            "--max-prefill-tokens",
            req.max_prefill_tokens,
            req.max_prefill_tokens is None or 1 <= req.max_prefill_tokens <= MAX_PREFILL_TOKENS,
            f"1..{MAX_PREFILL_TOKENS}",
        ),
        ("--mtp", req.mtp, 0 <= req.mtp <= 8, "0..8 draft tokens"),
        (
            "--mtp-acceptance",
            req.mtp_acceptance,
            req.mtp_acceptance is None or 0 <= req.mtp_acceptance <= 1,
            "in [0, 1]",
        ),
        (
            "--prefix-cached-fraction",
            req.prefix_cached_fraction,
            0 <= req.prefix_cached_fraction <= 1,
            "in [0, 1], the share of each prompt already in the prefix cache",
        ),
    ]
    for flag, value, ok, expected in [*checks, *_layout_checks(req)]:
        if not ok:
            raise PlanInputError(f"{flag}: out of range (got {value}, expected {expected})")


def _layout_checks(req: PlanRequest) -> list[tuple[str, int | None, bool, str]]:
    degrees = [("--dp", req.dp), ("--ep", req.ep), ("--pp", req.pp)]
    optional = [("--nodes", req.nodes), ("--devices-per-node", req.devices_per_node)]
    limit = f"1..{MAX_DEGREE}"
    checks: list[tuple[str, int | None, bool, str]] = [
        (flag, value, 1 <= value <= MAX_DEGREE, limit) for flag, value in degrees
    ]
    checks += [(flag, value, value is None or 1 <= value <= MAX_DEGREE, limit) for flag, value in optional]
    redundant_ok = 0 <= req.redundant_experts <= MAX_REDUNDANT_EXPERTS
    checks.append(("--redundant-experts", req.redundant_experts, redundant_ok, f"0..{MAX_REDUNDANT_EXPERTS}"))
    return checks


def memory_fraction(
    req: PlanRequest, *, engine: EngineName, hardware: HardwareProfile, drafting: bool
) -> float:
    """--memory-fraction when given, else the engine's own setting for this deployment
    (registry.deployment_memory_fraction: a constant, or SGLang's mem_fraction_static formula)."""
    if req.memory_fraction is not None:
        return req.memory_fraction
    return registry.deployment_memory_fraction(
        engine,
        hardware,
        ranks=(req.tp, req.pp, req.dp),
        prefill_tokens=req.max_prefill_tokens,
        drafting=drafting,
    )


def prefill_budget(
    given: int | None,
    *,
    engine: EngineName,
    hardware: HardwareProfile,
    ctx_tokens: int,
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS,
    prompt_tokens: int = 0,
) -> int:
    """Prompt tokens one prefill pass takes: `given`, else the engine's default, else
    deployment.default_max_prefill_tokens; raised where the engine requires it
    (registry.prefill_at_least_input: MindIE's maxPrefillTokens >= maxInputTokenLen) to maxInputTokenLen:
    the default input part of --ctx, as `kvplan mindie` writes it (common.resolve_lengths), or the workload's
    `prompt_tokens` when longer (a config serving them must accept them). The plan, serve and the fit's
    serving rows (fit/prepared.py) all take it from here."""
    block = block_size_tokens
    tokens = (
        given
        or registry.default_prefill_tokens(engine, hardware)
        or deployment.default_max_prefill_tokens(ctx_tokens, block_size_tokens=block)
    )
    limit = registry.prompt_token_limit(engine)
    if limit is not None and prompt_tokens > limit:  # the workload's prompt, not a budget flag, is over it
        raise PlanInputError(
            f"--input-tokens: {engine} takes prompts of at most {limit} tokens (maxInputTokenLen; got "
            f"{prompt_tokens}, expected <= {limit}); shorten the prompts or use --engine vllm"
        )
    if registry.prefill_at_least_input(engine):
        default_input = deployment.default_input_tokens(ctx_tokens, block_size_tokens=block)
        tokens = max(tokens, default_input, prompt_tokens)
    return tokens


class Resolved(NamedTuple):
    """What a request resolves to before its Deployment is built (resolve_request): parsed values, the model
    card and alias, the card profile with its overrides, (method, drafts, acceptance) of speculation."""

    engine: EngineName
    ctx_tokens: int
    scheme: str
    card: ModelCard
    alias: str | None
    hardware: HardwareProfile
    speculation: tuple[str, int, float]


def resolve_request(req: PlanRequest) -> Resolved:
    """Check ranges, resolve ids and parse values, in this order; raises KvplanError subclasses naming the
    offending flag. Nothing here reads --max-prefill-tokens but its range check."""
    _check_ranges(req)
    engine = parse_engine(req.engine)
    ctx_tokens = parse_context(req.ctx)
    scheme = req.dtype if req.dtype.strip().lower() == AUTO_DTYPE else parse_weight_scheme(req.dtype)
    card, alias = catalog.resolve_model(req.model)
    hw = apply_overrides(
        catalog.resolve_card(req.card, engine=engine, profile_engine=registry.fitted_profile_engine(engine)),
        memory_gib=req.memory_gib,
        bandwidth_gbps=req.bandwidth_gbps,
    )
    method, drafts, acceptance = speculation(
        mtp=req.mtp,
        mtp_acceptance=req.mtp_acceptance,
        speculative_config=req.speculative_config,
        acceptance_rate=req.acceptance_rate,
    )
    if method == "mtp" and drafts and card.mtp_layers == 0:
        flag = "--speculative-config" if req.speculative_config else "--mtp"
        raise PlanInputError(f"{flag}: {card.id} ships no MTP layers (got {drafts} MTP drafts, expected 0)")
    scheme = weight_dtype_on(scheme, hardware=hw)  # auto: the card's 16-bit dtype, now the card is known
    return Resolved(engine, ctx_tokens, scheme, card, alias, hw, (method, drafts, acceptance))


def to_deployment(req: PlanRequest, *, prompt_tokens: int = 0) -> Deployment:
    """Resolve ids and parse values (resolve_request), then build the Deployment; raises KvplanError
    subclasses naming the offending flag. prompt_tokens: the workload's longest prompt (serve), which the
    prefill budget must hold where the engine requires it (prefill_budget). --batch above what the engine's
    config takes beside that budget is refused (registry.check_batch_cap: vLLM's max_num_seqs <=
    max_num_batched_tokens), per DP group: ceil(batch / dp)."""
    dep = build_deployment(req, resolve_request(req), prompt_tokens=prompt_tokens)
    group = None if req.batch is None else -(-req.batch // dep.dp)
    registry.check_batch_cap(dep, batch=group, flag="--batch")
    return dep


def workload_deployment(req: PlanRequest, *, prompt_tokens: int) -> Deployment:
    """The Deployment of `kvplan simulate` for a workload whose longest prompt has `prompt_tokens`, built
    once. Its prefill budget: --max-prefill-tokens (the engine's: MindIE maxPrefillTokens, a chunking
    engine's max_num_batched_tokens / chunked_prefill_size); else the engine's default; else, for an engine
    that prefills a prompt in one pass (no engine default: MindIE, transformers), at least that prompt;
    then raised where the engine requires it (prefill_budget: MindIE's maxInputTokenLen)."""
    resolved = resolve_request(req)
    engine, hw = resolved.engine, resolved.hardware
    given = req.max_prefill_tokens
    one_pass = registry.default_prefill_tokens(engine, hw) is None
    if given is None and one_pass:
        default = prefill_budget(
            None, engine=engine, hardware=hw, ctx_tokens=resolved.ctx_tokens, block_size_tokens=req.block_size
        )
        given = prompt_tokens if default < prompt_tokens else None
    sized = replace(req, max_prefill_tokens=given)
    return build_deployment(sized, resolved, prompt_tokens=prompt_tokens)


def build_deployment(req: PlanRequest, resolved: Resolved, *, prompt_tokens: int) -> Deployment:
    """The Deployment of a request resolved by resolve_request (of this request, or of one that differs in
    max_prefill_tokens only): prefill budget from prefill_budget at `prompt_tokens`."""
    engine, ctx_tokens, scheme, card, alias, hw, (method, drafts, acceptance) = resolved
    activation = activation_dtype_of(scheme, card_activation=hw.activation_dtype)
    budget = prefill_budget(
        req.max_prefill_tokens,
        engine=engine,
        hardware=hw,
        ctx_tokens=ctx_tokens,
        block_size_tokens=req.block_size,
        prompt_tokens=prompt_tokens,
    )
    return Deployment(
        **carried(req, REQUEST_ECHOES),
        model=card,
        hardware=hw,
        weight_scheme_name=scheme,
        kv_dtype=parse_kv_dtype(req.kv_dtype, default=activation),
        ctx_tokens=ctx_tokens,
        block_size_tokens=req.block_size,
        memory_fraction=memory_fraction(req, engine=engine, hardware=hw, drafting=drafts > 0),
        max_prefill_tokens=budget,
        mtp_tokens=drafts,
        mtp_acceptance_fraction=acceptance,
        speculative_method=method,
        model_alias=alias,
        engine=engine,
    )
