"""A P:D fleet: P prefill and D decode instances of one deployment (the prefill side with its own tp, dp
and ep where given: PrefillLayout), the KV link between them, and the seconds each request's KV takes over
it. An instance with dp > 1 is dp DP groups, each simulated as an engine of its own (pdloop.engines_for).
Split from planner/sim/pd.py (the two sides run one after the other) so planner/sim/pdloop.py (all
instances together) reads it without pd.py's runner.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner import capacity, memory, units
from planner.arrays import FloatArray, IntArray
from planner.deployment import Deployment
from planner.engines import registry
from planner.errors import PlanInputError

MAX_INSTANCES = 64  # per side: a larger fleet is a typo (and each instance is simulated on its own)


@dataclass(frozen=True)
class PdSpec:
    """P prefill and D decode instances (each a deployment of its own tp) and the KV link between them."""

    prefill: Deployment
    decode: Deployment
    prefill_instances: int
    decode_instances: int
    link_bytes_per_s: float
    link_latency_s: float

    @property
    def devices(self) -> int:
        """Cards in the fleet: P * devices of a prefill instance + D * devices of a decode instance."""
        return self.prefill_instances * instance_devices(
            self.prefill
        ) + self.decode_instances * instance_devices(self.decode)

    @property
    def prefill_groups(self) -> int:
        """Simulated prefill engines: P instances x dp DP groups each (pdloop.engines_for)."""
        return self.prefill_instances * self.prefill.dp

    @property
    def decode_groups(self) -> int:
        """Simulated decode engines: D instances x dp DP groups each."""
        return self.decode_instances * self.decode.dp


@dataclass(frozen=True)
class PrefillLayout:
    """The prefill instances' degrees where they differ from the decode instances' (None: the decode's).
    vllm-ascend's P:D configs set each side's own tp and dp (and so ep = tp x dp under
    --enable-expert-parallel): e.g. Qwen3-235B prefill tp 8 dp 2, decode tp 4 dp 4
    (lab/published/pd_deployments.py)."""

    tp: int | None = None
    dp: int | None = None
    ep: int | None = None


PREFILL_DEGREES = ("tp", "dp", "ep")  # PrefillLayout's fields, flags --prefill-tp/-dp/-ep


def instance_devices(dep: Deployment) -> int:
    """Cards one instance of the deployment occupies: tp x dp x pp (its DP groups are one instance)."""
    return dep.tp * dep.dp * dep.pp


def decoder_emits_first(spec: PdSpec) -> bool:
    """True for vLLM: vllm-ascend's P:D proxy sends the prefill instance a copy of the request with
    max_tokens 1 and stream off, keeps only its kv_transfer_params, and streams the user's tokens from the
    decode instance (examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py @93dbfa65:
    send_request_to_service, _handle_completions' generate_stream). So TTFT = prefill + KV pull + decode
    admission + one decode step, and the decoder generates all O tokens. MindIE: its PD first token's source
    is not checked here; TTFT keeps ending at the prefill [assumed]."""
    return registry.decoder_streams_first_token(spec.decode.engine)


def parse_pd(text: str) -> tuple[int, int]:
    """`P:D` -> (P, D), each in 1..MAX_INSTANCES."""
    left, sep, right = str(text).partition(":")
    if not sep or not all(side.strip().isascii() and side.strip().isdigit() for side in (left, right)):
        raise PlanInputError(f"--pd: not a P:D ratio (got {text!r}, expected e.g. 1:2)")
    counts = int(left), int(right)
    if not all(1 <= n <= MAX_INSTANCES for n in counts):
        raise PlanInputError(
            f"--pd: instance counts out of range (got {text!r}, expected 1..{MAX_INSTANCES} each)"
        )
    return counts


def spec_for(
    dep: Deployment,
    *,
    counts: tuple[int, int],
    prefill: PrefillLayout = PrefillLayout(),
    link_gbps: float | None = None,
) -> PdSpec:
    """Both sides from one deployment (`prefill` overrides the prefill instances' tp, dp, ep); the link is
    the card profile's interconnect unless link_gbps (GB/s per device) is given. Raises DoesNotFitError
    (exit 3) when either side cannot hold the model, PlanInputError naming the --prefill-* flag when the
    prefill side's layout is inconsistent."""
    update = {name: value for name, value in vars(prefill).items() if value is not None}
    prefill_dep = dep.model_copy(update=update)
    capacity.memory_plan(dep)
    try:
        capacity.memory_plan(prefill_dep)
    except PlanInputError as exc:  # the decode side passed: a prefill degree is its --prefill-* flag's
        text = str(exc)
        flag = next((name for name in PREFILL_DEGREES if text.startswith(f"--{name}:")), None)
        if flag is None:
            raise
        hint = "" if flag in update else f"; --prefill-{flag} defaults to --{flag}"
        raise PlanInputError(f"--prefill-{flag}:" + text.removeprefix(f"--{flag}:") + hint) from exc
    link = dep.hardware.interconnect
    bandwidth = units.gb_per_s_to_bytes_per_s(link_gbps or link.bandwidth_gb_per_s)
    return PdSpec(
        prefill=prefill_dep,
        decode=dep,
        prefill_instances=counts[0],
        decode_instances=counts[1],
        link_bytes_per_s=bandwidth,
        link_latency_s=units.us_to_s(link.latency_us),
    )


def kv_transfer_s(spec: PdSpec, *, prompt_tokens: IntArray) -> FloatArray:
    """Seconds to move each request's KV from its prefill instance to its decode instance.

    Formula: latency + (paged(prompt) * kv_bytes_per_token + state_bytes) / link bandwidth, per prefill
    device (the tp shards move in parallel, each over its own device's link).
    """
    dep = spec.prefill
    per_token = memory.kv_cache_bytes_per_token(
        dep.model, kv_dtype=dep.kv_dtype, tp=dep.tp, mtp=dep.include_mtp
    )
    state = memory.linear_state_bytes_per_sequence(dep.model, conv_dtype=dep.activation_dtype, tp=dep.tp)
    paged = memory.paged_tokens(prompt_tokens, block_size_tokens=dep.block_size_tokens)
    return spec.link_latency_s + (paged * per_token + state) / spec.link_bytes_per_s
