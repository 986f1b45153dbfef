"""Hardware profiles in datasheet units (`_gib`, `_gb_per_s`, `_tflop_per_s`, `_us`; properties convert
them to SI once), the measured coefficients the roofline applies to them, and the `measured:` block that
`kvplan calibrate` writes. Re-exported by planner/schema.py.
"""

from typing import Literal, Self

from pydantic import Field, model_validator

from planner import units
from planner.schema_base import DataModel, Source

# Physical ranges of a hardware profile's measured coefficients (T7 of issue 26): a value outside them is a
# typo or a hostile file, and near zero it turns into overflowing divisions.
# [assumed: far below any device's own measurement (shipped fractions >= 0.02); a `calibrate --device cpu
# --dry-run` against a GPU datasheet measures ~6e-6, and 1/1e-7 cannot overflow a float]
MIN_FRACTION = 1e-7
MAX_OVERHEAD_US = 1e6  # [assumed: no kernel, step or link latency takes a second]
MIN_US = 1e-6  # [assumed: a picosecond kernel is no measurement]
MIN_GB_PER_S = 1e-6  # [assumed: 1 kB/s; a CPU dry run's smallest attention point measured ~6e-4 GB/s]
MAX_GB_PER_S = 1e7  # [assumed: 10 PB/s, as memory_bandwidth_gb_per_s's ceiling]
MAX_TABLE_INT = 1_000_000_000  # [assumed: tokens, batch and heads of a measured table point]


class AttentionRate(DataModel):
    """One measured decode-attention point (query length 1, one layer): the KV bytes read per second.

    gb_per_s = 2 * batch * kv_heads * ctx * head_dim * 2 bytes / median time; the time includes the kernels'
    fixed cost, so small points show low rates. planner/perf/attention.py interpolates these in log space.
    """

    batch: int = Field(gt=0, le=MAX_TABLE_INT)
    kv_heads: int = Field(gt=0, le=MAX_TABLE_INT)
    head_dim: int = Field(gt=0, le=MAX_TABLE_INT)
    ctx_tokens: int = Field(gt=0, le=MAX_TABLE_INT)
    gb_per_s: float = Field(ge=MIN_GB_PER_S, le=MAX_GB_PER_S)


class KernelCost(DataModel):
    """Measured per-kernel time of small decode kernels at one token count (rows of [tokens, hidden]);
    hidden_size: the benchmark's hidden size (None: the table is indexed by tokens alone)."""

    tokens: int = Field(gt=0, le=MAX_TABLE_INT)
    kernel_us: float = Field(ge=MIN_US, le=MAX_OVERHEAD_US)
    hidden_size: int | None = Field(default=None, gt=0)


class GemmEfficiency(DataModel):
    """One measured matmul (bf16): achieved / datasheet dense peak at `tokens` rows (M) and N*K weights."""

    tokens: int = Field(ge=1, le=MAX_TABLE_INT)
    weight_elements: float = Field(ge=1, le=1e15)
    fraction: float = Field(ge=MIN_FRACTION, le=1)


class PrefillAttentionRate(DataModel):
    """Measured causal prefill attention (one sequence, GQA) at `tokens` prompt tokens, in TFLOP/s."""

    q_heads: int = Field(ge=1, le=MAX_TABLE_INT)
    head_dim: int = Field(ge=1, le=MAX_TABLE_INT)
    tokens: int = Field(ge=1, le=MAX_TABLE_INT)
    tflop_per_s: float = Field(ge=1e-6, le=1e6)


class PrefillLayerCost(DataModel):
    """Measured non-matmul, non-attention kernel time of ONE decoder layer's prefill of `tokens` tokens
    (norms, rotary, activations, copies; conv + gating + chunked delta rule in linear-attention layers).

    elements_per_token: the measured layer's matmul input + output activation elements per token (the
    size the planner scales it by); kind: "attention" (full-attention layer) or "linear_attention";
    engine: the engine whose layer code was timed (the planner uses rows of the deployment's engine only);
    eager_us: wall time of the whole layer call, launched eagerly (above the kernel time when the host's
    launches are slower than the device: the floor of a small model's prefill).
    """

    # planner.kinds.EngineName (schema sits below kinds)
    engine: Literal["mindie", "vllm", "transformers", "sglang"]
    kind: Literal["attention", "linear_attention"]
    elements_per_token: int = Field(ge=1, le=MAX_TABLE_INT)
    tokens: int = Field(ge=1, le=MAX_TABLE_INT)
    us: float = Field(ge=MIN_US, le=MAX_OVERHEAD_US)
    eager_us: float | None = Field(default=None, ge=MIN_US, le=MAX_OVERHEAD_US)


class PerfCoefficients(DataModel):
    """Efficiencies and overheads the roofline applies to a card's datasheet peaks.

    weight_read_bandwidth_fraction   achieved / datasheet bandwidth when streaming weights (decode GEMV)
    kv_read_bandwidth_fraction       achieved / datasheet bandwidth in decode attention over the KV cache
    compute_fraction                 achieved / datasheet dense peak, per compute dtype (large GEMM)
    kernel_overhead_us               fixed cost of one small non-matmul decode kernel (norm, add, rope piece)
                                     replayed from a graph: launch gap plus its minimum run time
    matmul_latency_us                fixed cost of one decode matmul kernel: t = latency + bytes / bandwidth
    step_overhead_us                 fixed cost per decode step (sampling, scheduling, host sync)
    prefill_pass_overhead_us         fixed cost of one prefill pass on top of step_overhead_us, which a
                                     graph-replayed decode step does not pay (eager launches, input
                                     preparation); 0 unless fitted to serving rows (--from-bench)
    request_overhead_us              cost of one request outside the forward pass (API server, tokenization,
                                     detokenization, scheduling, the first step of a captured graph): it
                                     adds to that request's TTFT only and never stalls a running decode;
                                     per engine and version, 0 unless fitted to serving rows with a TTFT
    sequence_overhead_us             cost per sequence per step (scheduler, host, per-request kernels);
                                     0 unless fitted to measured steps (kvplan calibrate --from-bench)
    state_read_bandwidth_fraction    achieved / datasheet bandwidth of the linear-attention (GDN) state
                                     update; None: kv_read_bandwidth_fraction
    allreduce_latency_us             fixed latency of one tensor-parallel all-reduce
    allreduce_bandwidth_fraction     achieved / datasheet interconnect bandwidth for all-reduce
    kernel_overhead_table            kernel_overhead_us measured at several token counts (a decode layer's
                                     small-kernel mix; with hidden_size, a model of another hidden size
                                     reads it at tokens * its hidden / hidden_size); None: kernel_overhead_us
                                     at every batch
    attention_table                  measured decode-attention rates over batch x kv heads x ctx; None: the
                                     roofline uses kv_read_bandwidth_fraction for attention
    attention_tables                 one such table per decode-attention kernel (e.g. cudnn, flash);
                                     None: only attention_table
    attention_kernels                engine -> {head_dim: kernel name in attention_tables}: the kernel that
                                     engine runs for decode at that head_dim (nearest head_dim when not
                                     listed); an engine not listed uses attention_table
    grouped_matmul_latency_us        fixed cost of one grouped expert GEMM (MoE gate_up or down over all
                                     experts): t = latency + touched expert bytes / bandwidth;
                                     None: matmul_latency_us
    grouped_weight_read_bandwidth_fraction   achieved / datasheet bandwidth of the same fit; None:
                                     weight_read_bandwidth_fraction
    expert_imbalance_factor          rows the busiest expert-parallel rank receives / the mean (>= 1); None:
                                     planner/perf/opgeometry.py's assumed default (only used when ep > 1)
    gemm_efficiency_table            prefill matmul efficiency vs M tokens and N*K (bf16/fp16 terms);
                                     None: compute_fraction
    prefill_attention_table          prefill attention rates vs prompt tokens; None: compute_fraction
                                     x prefill_attention_fraction
    prefill_attention_fraction       prefill attention's compute rate / a GEMM's of its dtype (1: as fast)
    prefill_attention_prior_factor   one-sigma factor (x/) of that fraction's prior (centred at 1) in a
                                     --from-bench fit; None: the fit holds it at the profile's value
    prefill_layer_table              prefill non-matmul time per layer vs tokens; None: norms / gdn.update
                                     terms as in decode (bytes, FLOP, kernel overheads)
    chunked_gdn_ns_per_head_token    device time of the chunked Gated DeltaNet prefill kernels (cumsum,
                                     kkt, solve_tril, wy, chunk_h, chunk_o) per prompt token per value head
                                     per linear layer at dk = dv = 128; None: gdn.update's FLOP at
                                     compute_fraction (or the prefill layer table)
    prefill_linear_attention_fraction  chunked-GDN prefill's served rate / chunked_gdn_ns_per_head_token's
    prefill_linear_attention_prior_factor  its prior's x/ (centred at 1; None: held), as for attention
    compute_fraction_prior_factor    one-sigma factor (x/) within which a prefill measurement (on this card
                                     or a sibling) supports compute_fraction; a --from-bench fit pulls its
                                     compute scale toward 1 at this width. It only narrows, so it lies in
                                     (1, 4]; None: x/ 4 (assumed), x/ 1.25 on a calibrated profile
    allreduce_latency_prior_factor   one-sigma factor (x/) of allreduce_latency_us's prior in a --from-bench
                                     fit; None: the fit holds allreduce_latency_us at the profile's value
    """

    weight_read_bandwidth_fraction: float = Field(ge=MIN_FRACTION, le=1)
    kv_read_bandwidth_fraction: float = Field(ge=MIN_FRACTION, le=1)
    compute_fraction: dict[str, float] = Field(default_factory=dict)
    kernel_overhead_us: float = Field(ge=0, le=MAX_OVERHEAD_US)
    matmul_latency_us: float = Field(ge=0, le=MAX_OVERHEAD_US)
    step_overhead_us: float = Field(ge=0, le=MAX_OVERHEAD_US)
    prefill_pass_overhead_us: float = Field(default=0.0, ge=0, le=MAX_OVERHEAD_US)
    request_overhead_us: float = Field(default=0.0, ge=0, le=MAX_OVERHEAD_US)
    sequence_overhead_us: float = Field(default=0.0, ge=0, le=MAX_OVERHEAD_US)
    state_read_bandwidth_fraction: float | None = Field(default=None, ge=MIN_FRACTION, le=1)
    allreduce_latency_us: float = Field(ge=0, le=MAX_OVERHEAD_US)
    allreduce_bandwidth_fraction: float = Field(ge=MIN_FRACTION, le=1)
    kernel_overhead_table: list[KernelCost] | None = Field(default=None, min_length=1)
    attention_table: list[AttentionRate] | None = Field(default=None, min_length=1)
    attention_tables: dict[str, list[AttentionRate]] | None = Field(default=None, min_length=1)
    attention_kernels: dict[str, dict[int, str]] | None = None
    grouped_matmul_latency_us: float | None = Field(default=None, ge=0, le=MAX_OVERHEAD_US)
    grouped_weight_read_bandwidth_fraction: float | None = Field(default=None, ge=MIN_FRACTION, le=1)
    expert_imbalance_factor: float | None = Field(default=None, ge=1, le=64)
    gemm_efficiency_table: list[GemmEfficiency] | None = Field(default=None, min_length=1)
    prefill_attention_table: list[PrefillAttentionRate] | None = Field(default=None, min_length=1)
    prefill_layer_table: list[PrefillLayerCost] | None = Field(default=None, min_length=1)
    chunked_gdn_ns_per_head_token: float | None = Field(default=None, ge=1e-6, le=1e6)
    compute_fraction_prior_factor: float | None = Field(default=None, ge=1.01, le=4)
    allreduce_latency_prior_factor: float | None = Field(default=None, ge=1.01, le=100)
    prefill_attention_fraction: float = Field(default=1.0, ge=MIN_FRACTION, le=1)
    prefill_attention_prior_factor: float | None = Field(default=None, ge=1.01, le=100)
    prefill_linear_attention_fraction: float = Field(default=1.0, ge=MIN_FRACTION, le=1)
    prefill_linear_attention_prior_factor: float | None = Field(default=None, ge=1.01, le=100)

    @model_validator(mode="after")
    def _check_fractions(self) -> Self:
        for dtype, fraction in self.compute_fraction.items():
            if not MIN_FRACTION <= fraction <= 1:
                raise ValueError(f"compute_fraction.{dtype} must be in [{MIN_FRACTION}, 1] (got {fraction})")
        tables = self.attention_tables or {}
        for engine, by_dim in (self.attention_kernels or {}).items():
            for head_dim, kernel in by_dim.items():
                if kernel not in tables or not tables[kernel]:
                    raise ValueError(
                        f"attention_kernels.{engine}.{head_dim} names kernel {kernel!r}, which has no table "
                        f"in attention_tables (got {sorted(tables)})"
                    )
        return self


class Interconnect(DataModel):
    """Device-to-device links: the node's own (tensor-parallel all-reduce, intra-node all-to-all) and the
    network between nodes (None where the profile does not know it; planner/layout.py says so)."""

    kind: str
    bandwidth_gb_per_s: float = Field(ge=MIN_GB_PER_S, le=MAX_GB_PER_S)  # per direction, per device
    latency_us: float = Field(ge=0, le=MAX_OVERHEAD_US)
    devices_per_node: int | None = Field(default=None, ge=1, le=1024)  # devices the node's link joins
    inter_node_kind: str | None = None
    # per direction, per device
    inter_node_bandwidth_gb_per_s: float | None = Field(default=None, ge=MIN_GB_PER_S, le=MAX_GB_PER_S)
    inter_node_latency_us: float | None = Field(default=None, ge=0, le=MAX_OVERHEAD_US)


class MeasuredBlock(DataModel):
    """Written only by `kvplan calibrate`: measured coefficients plus their provenance."""

    tool: str
    tool_version: str
    date: str
    device_name: str
    backend: str  # cuda | npu | cpu | bench-fit
    versions: dict[str, str] = Field(default_factory=dict)
    coefficients: PerfCoefficients
    memory_bandwidth_gb_per_s: float | None = Field(default=None, ge=MIN_GB_PER_S, le=MAX_GB_PER_S)
    usable_memory_gib: float | None = Field(default=None, ge=1 / 1024, le=2.0**20)
    samples: dict[str, list[float]] = Field(default_factory=dict)
    notes: str = ""

    @property
    def is_dry_run(self) -> bool:
        """True for `kvplan calibrate --device cpu --dry-run`: the calibration path exercised on this
        machine's CPU, which says nothing about an accelerator (no catalogued card is a CPU)."""
        return self.backend == "cpu"

    @property
    def status(self) -> str:
        """Where the coefficients come from, in a user's words: a fit, a measurement or a dry run."""
        if self.backend == "bench-fit":
            return f"calibrated: {self.device_name.removeprefix('calibrated: ')}"
        if self.is_dry_run:
            return "uncalibrated: a CPU dry run of `kvplan calibrate`, not a measurement of this card"
        return f"calibrated: measured by `{self.tool}` on {self.device_name} ({self.date[:10]})"


class CardVariant(DataModel):
    """One shipping memory configuration (SKU) of a chip: the same die and speeds, another memory size.

    memory_capacity_gib   nominal device memory, as sold (GB or GiB as the source states; taken as GiB)
    visible_memory_bytes  the device total the runtime reports, in bytes as the logs print it
                          (torch_npu.npu.mem_get_info()[1], vllm-ascend's "total memory" log, MindIE's
                          acl.rt.get_mem_info); None: not found, the planner uses memory_capacity_gib
    """

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str = Field(min_length=1)
    memory_capacity_gib: float = Field(gt=0, le=2.0**20)
    visible_memory_bytes: int | None = Field(default=None, gt=0, le=2**50)
    sources: list[Source] = Field(min_length=1)
    notes: str = ""


class HardwareProfile(DataModel):
    """One accelerator as the planner sees it, in datasheet units.

    visible_memory_bytes: the device total the runtime reports (see CardVariant); the planner sizes memory
    from it (device_total_bytes), falling back to the nominal memory_capacity_gib when it is not known.
    variants: the chip's shipping memory configurations; `variant` names the one whose figures the
    top-level memory fields carry (None: a custom size, e.g. --memory-gib).
    """

    schema_version: Literal[1] = 1
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    vendor: Literal["huawei", "nvidia"]
    memory_capacity_gib: float = Field(gt=0, le=2.0**20)  # <= 1 PiB; >= 1 MiB in _check_peaks
    memory_bandwidth_gb_per_s: float = Field(gt=0, le=1e7)  # >= 1 MB/s in _check_peaks
    peak_tflop_per_s: dict[str, float] = Field(min_length=1)  # dense, without sparsity
    native_dtypes: list[str] = Field(min_length=1)
    interconnect: Interconnect
    visible_memory_bytes: int | None = Field(default=None, gt=0, le=2**50)
    runtime_overhead_gib: float = Field(ge=0, le=2.0**20)  # inside the device total: idle use, buffers
    mindie_max_batch_size: int | None = Field(default=None, ge=1, le=2**32 - 1)  # card's documented range
    variant: str | None = None
    variants: list[CardVariant] = Field(default_factory=list)
    default_coefficients: PerfCoefficients
    sources: list[Source] = Field(min_length=1)
    notes: str = ""
    measured: MeasuredBlock | None = None

    @model_validator(mode="after")
    def _check_peaks(self) -> Self:
        for dtype, peak in self.peak_tflop_per_s.items():
            if peak <= 0:
                raise ValueError(f"peak_tflop_per_s.{dtype} must be > 0 (got {peak})")
            if not 1e-6 <= peak <= 1e6:
                raise ValueError(f"peak_tflop_per_s.{dtype} must be in [1e-6, 1e6] (got {peak})")
        if self.memory_capacity_gib < 1 / 1024 or self.memory_bandwidth_gb_per_s < 1e-3:
            raise ValueError(
                f"memory_capacity_gib must be >= 1 MiB and memory_bandwidth_gb_per_s >= 0.001 "
                f"(got {self.memory_capacity_gib} and {self.memory_bandwidth_gb_per_s})"
            )
        missing = [
            d
            for d in self.native_dtypes
            if d in ("bf16", "fp16", "fp8", "int8") and d not in self.peak_tflop_per_s
        ]
        if missing:
            raise ValueError(f"native dtypes without a peak_tflop_per_s entry: {', '.join(missing)}")
        self._check_variants()
        return self

    def _check_variants(self) -> None:
        if self.visible_memory_bytes is not None and self.visible_memory_bytes > self.memory_capacity_bytes:
            raise ValueError(
                f"visible_memory_bytes must be <= memory_capacity_gib "
                f"(got {self.visible_memory_bytes} B > {self.memory_capacity_gib} GiB)"
            )
        ids = [v.id for v in self.variants]
        if len(set(ids)) != len(ids):
            raise ValueError(f"variants: ids must be unique (got {ids})")
        if self.variant is None:
            return
        chosen = next((v for v in self.variants if v.id == self.variant), None)
        if chosen is None:
            raise ValueError(
                f"variant must name one of variants (got {self.variant!r}, expected one of {ids})"
            )
        if (chosen.memory_capacity_gib, chosen.visible_memory_bytes) != (
            self.memory_capacity_gib,
            self.visible_memory_bytes,
        ):
            raise ValueError(
                f"memory_capacity_gib / visible_memory_bytes must equal variant {chosen.id}'s "
                f"(got {self.memory_capacity_gib} / {self.visible_memory_bytes}, expected "
                f"{chosen.memory_capacity_gib} / {chosen.visible_memory_bytes})"
            )

    @property
    def memory_capacity_bytes(self) -> int:
        """Device memory in bytes (from memory_capacity_gib)."""
        return units.gib_to_bytes(self.memory_capacity_gib)

    @property
    def device_total_bytes(self) -> int:
        """Device memory the planner sizes from, in bytes: the runtime-visible total when the profile
        knows it (visible_memory_bytes), else the nominal memory_capacity_gib."""
        if self.visible_memory_bytes is not None:
            return self.visible_memory_bytes
        return self.memory_capacity_bytes

    @property
    def variant_id(self) -> str:
        """The card variant (SKU) this profile describes: `variant`, else the profile id."""
        return self.variant or self.id

    def with_variant(self, variant_id: str) -> "HardwareProfile":
        """This profile with another of its variants' memory figures (ValueError: not a variant)."""
        chosen = next((v for v in self.variants if v.id == variant_id), None)
        if chosen is None:
            raise ValueError(f"{self.id} has no variant {variant_id!r}")
        update = {
            "variant": chosen.id,
            "memory_capacity_gib": chosen.memory_capacity_gib,
            "visible_memory_bytes": chosen.visible_memory_bytes,
        }
        return HardwareProfile.model_validate({**self.model_dump(), **update})

    @property
    def memory_bandwidth_bytes_per_s(self) -> float:
        """Datasheet memory bandwidth in bytes/s."""
        return units.gb_per_s_to_bytes_per_s(self.memory_bandwidth_gb_per_s)

    @property
    def runtime_overhead_bytes(self) -> int:
        """Memory the runtime holds outside weights, KV and activations, in bytes."""
        return units.gib_to_bytes(self.runtime_overhead_gib)

    @property
    def activation_dtype(self) -> str:
        """16-bit dtype used for activations and unquantized weights: bf16, else fp16 (e.g. 310P)."""
        return "bf16" if "bf16" in self.native_dtypes else "fp16"

    def peak_flop_per_s(self, dtype: str) -> float:
        """Dense datasheet peak for a compute dtype in FLOP/s; KeyError when the card has none."""
        return units.tflop_per_s_to_flop_per_s(self.peak_tflop_per_s[dtype])

    def coefficients(self, *, calibrated: bool = True) -> PerfCoefficients:
        """Measured coefficients when present and wanted, else the datasheet defaults."""
        if calibrated and self.measured is not None and self.is_calibrated:
            return self.measured.coefficients
        return self.default_coefficients

    @property
    def is_calibrated(self) -> bool:
        """True when `kvplan calibrate` measured this card or fitted it to benchmarks (a CPU dry run is not
        a calibration)."""
        return self.measured is not None and not self.measured.is_dry_run

    @property
    def calibration_status(self) -> str:
        """One line on where this profile's speeds come from; the same words in plans, `kvplan cards`
        and the dashboard."""
        if self.measured is None:
            return "uncalibrated: datasheet peaks x assumed efficiencies"
        return self.measured.status
