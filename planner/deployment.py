"""A deployment: what the user asked to plan (model, card, dtypes, parallelism, lengths, engine knobs).

Built once at the boundary (CLI, app) after validation; every formula downstream trusts it.
"""

from typing import Annotated, Any, Self

from pydantic import Field, model_validator
from pydantic_core import core_schema

from planner.degrees import MAX_DEGREE as MAX_DEGREE  # re-exported (planner/cli/layouts.py)
from planner.degrees import Degrees
from planner.dtypes import WEIGHT_SCHEMES, StorageDType, WeightScheme, activation_dtype_of
from planner.kinds import DEFAULT_ENGINE, ENGINES, EngineName
from planner.schema_card import ModelCard
from planner.schema_hardware import HardwareProfile

DEFAULT_BLOCK_SIZE_TOKENS = 128  # MindIE cacheBlockSize default; vllm-ascend also forces 128
DEFAULT_MEMORY_FRACTION = 0.8  # MindIE NPU_MEMORY_FRACTION default (mindie_llm/utils/env.py)
DEFAULT_MAX_PREFILL_TOKENS = 8192  # MindIE ScheduleConfig.maxPrefillTokens default
DEFAULT_MTP_ACCEPTANCE_FRACTION = 0.7  # [assumed: per-draft-token acceptance, DeepSeek-V3 report range]
# vLLM's --speculative-config "method" values kvplan times: "mtp" (the card's own MTP layers), and drafts from
# a separate draft model: "eagle3" (one decoder layer fed three target hidden states, k sequential passes)
# and "dflash" (a block-diffusion drafter, one parallel pass of 1 + k query tokens): planner/drafts.py.
SPECULATIVE_METHODS = ("mtp", "eagle3", "dflash")
DRAFT_MODEL_METHODS = SPECULATIVE_METHODS[1:]
# Decoder layers of each draft model (planner/drafts.py sizes them): EAGLE3's llama_eagle3.py builds one;
# [assumed: z-lab's DFlash drafters and DeepSpec's block drafters have 5 (DeepSpec's dspark qwen3 config
# num_draft_layers = 5); z-lab/Kimi-K2.5-DFlash's own config is not in the corpus]
DRAFT_MODEL_LAYERS = {"eagle3": 1, "dflash": 5}
MAX_SPECULATIVE_TOKENS = 16  # dflash drafters are trained on blocks of 16 (z-lab/*-DFlash-b16)
MAX_REDUNDANT_EXPERTS = 4096


OUTPUT_SHARE_DIVISOR = 4  # [assumed: default output = 1/4 of --ctx, MindIE's default is 512 of 2560]


def default_output_tokens(ctx_tokens: int, *, block_size_tokens: int) -> int:
    """Output tokens of a request when the user gives no split: a quarter of ctx in whole blocks.

    Formula: out = floor((ctx / 4) / block) * block, or max(ctx / 4, 1) when that is under one block.
    """
    quarter = ctx_tokens // OUTPUT_SHARE_DIVISOR
    return quarter // block_size_tokens * block_size_tokens or max(quarter, 1)


def default_input_tokens(ctx_tokens: int, *, block_size_tokens: int) -> int:
    """Input tokens of a request when the user gives no split: ctx - default_output_tokens (maxInputTokenLen
    as `kvplan mindie` writes it)."""
    return ctx_tokens - default_output_tokens(ctx_tokens, block_size_tokens=block_size_tokens)


def default_max_prefill_tokens(ctx_tokens: int, *, block_size_tokens: int) -> int:
    """The prefill batch every command sizes activations for when --max-prefill-tokens is not given.

    Formula: max(8192, ctx - out), out = default_output_tokens: MindIE needs maxPrefillTokens >=
    maxInputTokenLen, and `kvplan mindie` / `kvplan vllm` write exactly this (maxPrefillTokens,
    --max-num-batched-tokens), so the plan's activation peak is the one the engine will see.
    """
    return max(
        DEFAULT_MAX_PREFILL_TOKENS, default_input_tokens(ctx_tokens, block_size_tokens=block_size_tokens)
    )


class AsLoaded:
    """Annotation of a field that holds a data-file model as the catalogue loaded and validated it: the
    deployment checks the instance's class and keeps the instance as is (what pydantic does with a model
    instance anyway), without generating the model's own schema. So building the deployment's validator
    does not build ModelCard's and HardwareProfile's, which a plan read from the catalogue cache never
    needs (schema_base.DataModel builds them on first use; planner/catalog_cache.py)."""

    def __get_pydantic_core_schema__(self, source: type, handler: Any) -> core_schema.CoreSchema:
        """An is-instance check of the annotated class."""
        return core_schema.is_instance_schema(source)


class Deployment(Degrees):
    """Everything a plan depends on: the parallel degrees (tp, dp, ep, pp: Degrees) and what follows.
    `batch` None means: plan the largest batch that fits at ctx."""

    model: Annotated[ModelCard, AsLoaded()]
    hardware: Annotated[HardwareProfile, AsLoaded()]
    weight_scheme_name: str
    kv_dtype: StorageDType
    redundant_experts: int = Field(default=0, ge=0, le=MAX_REDUNDANT_EXPERTS)  # EPLB copies, all ranks
    nodes: int | None = Field(default=None, ge=1, le=MAX_DEGREE)  # None: as few as the layout needs
    devices_per_node: int | None = Field(default=None, ge=1, le=MAX_DEGREE)  # None: the card profile's
    ctx_tokens: int = Field(ge=1)
    batch: int | None = Field(default=None, ge=1)
    block_size_tokens: int = Field(default=DEFAULT_BLOCK_SIZE_TOKENS, ge=1, le=1024)
    memory_fraction: float = Field(default=DEFAULT_MEMORY_FRACTION, gt=0, le=1)
    max_prefill_tokens: int = Field(default=DEFAULT_MAX_PREFILL_TOKENS, ge=1)
    mtp_tokens: int = Field(default=0, ge=0, le=MAX_SPECULATIVE_TOKENS)  # num_speculative_tokens, any method
    mtp_acceptance_fraction: float = Field(default=DEFAULT_MTP_ACCEPTANCE_FRACTION, ge=0, le=1)
    # share of each prompt a prefix cache already holds (shared system prompt, multi-turn history): prefill
    # computes only the rest (planner/perf/prefill.py cached_prompt_tokens); 0 = every prompt computed in full
    prefix_cached_fraction: float = Field(default=0.0, ge=0, le=1)
    speculative_method: str = "mtp"  # SPECULATIVE_METHODS: who drafts the mtp_tokens
    calibrated: bool = True
    model_alias: str | None = None
    engine: EngineName = DEFAULT_ENGINE  # kernel structure of the decode step (planner/perf/kernels.py)

    @model_validator(mode="after")
    def _check_scheme(self) -> Self:
        if self.weight_scheme_name not in WEIGHT_SCHEMES:
            raise ValueError(f"unknown weight scheme {self.weight_scheme_name!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r} (expected one of {', '.join(ENGINES)})")
        if self.speculative_method not in SPECULATIVE_METHODS:
            raise ValueError(f"unknown speculative method {self.speculative_method!r}")
        return self

    @property
    def weight_scheme(self) -> WeightScheme:
        """The weight quantization scheme."""
        return WEIGHT_SCHEMES[self.weight_scheme_name]

    @property
    def activation_dtype(self) -> StorageDType:
        """Dtype of activations and unquantized weights: the card's 16-bit one, or fp16/fp32 weights' own."""
        return activation_dtype_of(self.weight_scheme_name, card_activation=self.hardware.activation_dtype)

    @property
    def is_tp_only(self) -> bool:
        """True for a plain tensor-parallel plan on one node (no DP, EP, PP, redundant experts or node
        settings, and tp within the card's devices per node: a wider tp spans nodes, as the configs say)."""
        extras = (self.dp, self.ep, self.pp, self.redundant_experts + 1)
        one_node = self.tp <= (self.hardware.interconnect.devices_per_node or self.tp)
        return extras == (1, 1, 1, 1) and self.nodes is None and self.devices_per_node is None and one_node

    @property
    def include_mtp(self) -> bool:
        """True when MTP speculative decoding is on (its layers are loaded and cached)."""
        return self.speculative_method == "mtp" and self.mtp_tokens > 0 and self.model.mtp_layers > 0

    @property
    def draft_method(self) -> str | None:
        """The separate draft model's method (DRAFT_MODEL_METHODS) when one drafts, else None."""
        drafting = self.speculative_method in DRAFT_MODEL_METHODS and self.mtp_tokens > 0
        return self.speculative_method if drafting else None

    @property
    def draft_layers(self) -> int:
        """Decoder layers of the separate draft model (DRAFT_MODEL_LAYERS), 0 without one."""
        return DRAFT_MODEL_LAYERS.get(self.draft_method or "", 0)

    @property
    def mtp_drafts(self) -> int:
        """Draft tokens of the card's own MTP layers (an engine's MTP plugin); 0 when off or when a separate
        draft model drafts."""
        return self.mtp_tokens if self.include_mtp else 0

    @property
    def speculative_tokens(self) -> int:
        """Draft tokens k each sequence verifies per decode step (MTP head or draft model); 0 when off."""
        return self.mtp_tokens if self.include_mtp or self.draft_method else 0
