"""Parallel layouts beyond tensor parallelism: attention data parallel (dp), expert parallel (ep), pipeline
stages (pp) and nodes. What each rank holds, which layouts each engine runs, and the communication buffers
a layout adds. docs/layouts.md explains the model and its sources.

A layout of tp x dp x pp devices (world size) runs attention tensor-parallel over tp ranks inside each of
dp data-parallel groups; each DP group serves its own sequences, so it holds only their KV. Routed experts
are split ep ways; each expert is further split moe_tp = tp * dp / ep ways (vLLM: the MoE layers form one
tp * dp group, EP when --enable-expert-parallel, tensor parallel otherwise). Dense MLPs, shared experts,
embeddings and lm_head stay tensor-parallel over tp. Pipeline stages each hold ceil(L / pp) layers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from planner import units
from planner.degrees import DEGREES, Degrees, carried
from planner.deployment import Deployment
from planner.errors import PlanInputError
from planner.params import Shards, kv_heads_per_rank
from planner.results import LayoutReport

# HCCL's default buffer per communicator: HcclCommConfig.hcclBufferSize, default 200 MB (CANN HCCL API
# reference, HcclCommInitRootInfoConfig). [datasheet: hiascend CANN 8.x hcclcpp_07_0007]
HCCL_DEFAULT_BUFFER_BYTES = 200 * units.MIB_BYTES
# MC2 dispatch/combine (aclnnMoeDistributeDispatch) reserve: its documented HCCL_BUFFSIZE floor adds 2 MB.
MC2_FIXED_BYTES = 2 * units.MIB_BYTES
# Tokens one rank dispatches per MC2 call (the op's BS). [assumed: 128 decode tokens per rank; with it the
# CANN A3 formula gives ~946 MB for DeepSeek-V3, matching the HCCL_BUFFSIZE=1024 of vllm-ascend's EP examples]
MC2_TOKENS_PER_RANK = 128
# Extra rows per token in the A3 window: H + 128 (the op's per-token scale and metadata). [CANN doc, as above]
MC2_A3_ROW_PAD = 128
UINT16_BYTES = 2  # the CANN formula's sizeof(uint16)
# Interconnect kinds whose MoE dispatch follows the Atlas A3 rule of the CANN doc.
A3_LINK_KINDS = frozenset({"ub-hccs"})


def world_size(dep: Deployment) -> int:
    """Devices of one instance: tp * dp * pp."""
    return dep.tp * dep.dp * dep.pp


def moe_tp(dep: Deployment) -> int:
    """Tensor-parallel degree inside each routed expert: tp * dp / ep (validated to divide)."""
    return dep.tp * dep.dp // dep.ep


def experts_per_rank(dep: Deployment) -> int:
    """Routed experts one rank holds: (E + redundant) / ep (validated to divide); E when ep = 1."""
    return (dep.model.routed_expert_count + dep.redundant_experts) // dep.ep


def shards(dep: Deployment) -> Shards:
    """The weight shards of one rank under the deployment's layout (params.Shards)."""
    return Shards(moe_tp=moe_tp(dep), experts_per_rank=experts_per_rank(dep), pp=dep.pp)


def speed_shards(dep: Deployment) -> Shards:
    """The shards the speed ledger streams: one rank's experts, every layer (a token passes all stages)."""
    return Shards(moe_tp=moe_tp(dep), experts_per_rank=experts_per_rank(dep), pp=1)


def off_node_fraction(group: int, *, per_node: int) -> float:
    """Share of a rank's traffic to the other members of a group of `group` ranks that leaves the node.

    Formula: (g - min(g, N)) / (g - 1) for uniform destinations (0 for g = 1); the group packs whole nodes.
    """
    if group <= 1:
        return 0.0
    return (group - min(group, per_node)) / (group - 1)


def expert_group(dep: Deployment) -> int:
    """Ranks the MoE dispatch spans: ep when expert parallel, else the dp groups' all-gather (dp)."""
    return dep.ep if dep.ep > 1 else dep.dp


def devices_per_node(dep: Deployment) -> int:
    """Devices per node: --devices-per-node, else the card profile's, else the whole instance (one node)."""
    return dep.devices_per_node or dep.hardware.interconnect.devices_per_node or world_size(dep)


def node_count(dep: Deployment) -> int:
    """Nodes the instance spans: --nodes, else ceil(world size / devices per node)."""
    return dep.nodes or math.ceil(world_size(dep) / devices_per_node(dep))


def per_dp_rank_batch(batch: int, *, dp: int) -> int:
    """Sequences one DP group serves when the instance serves `batch`: ceil(batch / dp)."""
    return -(-batch // dp)


def busy_dp_groups(users: int, *, dp: int) -> float:
    """How many DP groups' worth of throughput `users` identical closed-loop clients drive, each group
    serving ceil(users / dp) of them (per_dp_rank_batch): users / ceil(users / dp), at most dp.

    Exact when dp divides users, and when users < dp (only `users` groups have a client; the idle ones
    step with dummy batches and emit nothing). Otherwise the smaller groups are counted at the fuller
    group's per-user speed, a slight underestimate. Instance tokens/s = this x one group's tokens/s.
    """
    return users / per_dp_rank_batch(users, dp=dp)


def describe(layout: Degrees) -> str:
    """The layout in words: `tp=8` for a tensor-parallel plan, `tp=8 dp=2 ep=16` (non-1 degrees) else; of a
    deployment, a plan's LayoutReport or a layout the CLI was given (the one spelling every output uses)."""
    degrees = [("dp", layout.dp), ("ep", layout.ep), ("pp", layout.pp)]
    return " ".join([f"tp={layout.tp}", *(f"{name}={value}" for name, value in degrees if value > 1)])


def mc2_window_bytes(dep: Deployment) -> int:
    """HCCL window MC2 dispatch/combine needs on one rank (CANN aclnnMoeDistributeDispatch, HCCL_BUFFSIZE).

    Formula (A3, ub-hccs):  2 MiB + 2 * BS * 2 * (H + 128) * (ep * E_local + K + 1)
    Formula (A2, others):   2 * (BS * ep * min(E_local, K) * H * 2 + 2 MiB)
        BS  MC2_TOKENS_PER_RANK [assumed];  H hidden_size;  K num_experts_per_tok
        E_local  experts_per_rank;  the doc's sizeof(uint16) = 2 bytes per element
    """
    tokens, hidden = MC2_TOKENS_PER_RANK, dep.model.hidden_size
    top_k, local = dep.model.num_experts_per_tok or 0, experts_per_rank(dep)
    element_bytes = UINT16_BYTES
    if dep.hardware.interconnect.kind in A3_LINK_KINDS:
        rows = dep.ep * local + top_k + 1
        return MC2_FIXED_BYTES + 2 * tokens * element_bytes * (hidden + MC2_A3_ROW_PAD) * rows
    return 2 * (tokens * dep.ep * min(local, top_k) * hidden * element_bytes + MC2_FIXED_BYTES)


# The names of the layout's buffers (comm_buffer_bytes' keys; the engines' rooms say where each stands)
MC2_WINDOW = "MC2 dispatch/combine window"
EXPERT_GROUP_BUFFER = "expert-group communicator"
PIPELINE_BUFFER = "pipeline communicator"


def comm_buffer_bytes(dep: Deployment) -> dict[str, int]:
    """Communication buffers of one rank beyond the card's runtime reserve (which covers the TP group).

    Formula: expert group (MoE with dp > 1 or ep > 1): MC2 window when ep > 1 on Ascend, else one HCCL
    default buffer; pipeline (pp > 1): one HCCL default buffer. Empty for a tensor-parallel plan.
    """
    buffers: dict[str, int] = {}
    if dep.model.is_moe and dep.ep > 1 and dep.hardware.vendor == "huawei":
        buffers[MC2_WINDOW] = mc2_window_bytes(dep)
    elif dep.model.is_moe and (dep.ep > 1 or dep.dp > 1):
        buffers[EXPERT_GROUP_BUFFER] = HCCL_DEFAULT_BUFFER_BYTES
    if dep.pp > 1:
        buffers[PIPELINE_BUFFER] = HCCL_DEFAULT_BUFFER_BYTES
    return buffers


def _check_experts(dep: Deployment) -> None:
    card = dep.model
    experts = card.routed_expert_count
    if not card.is_moe and (dep.ep > 1 or dep.redundant_experts):
        flag, value = ("--ep", dep.ep) if dep.ep > 1 else ("--redundant-experts", dep.redundant_experts)
        raise PlanInputError(f"{flag}: {card.id} is a dense model with no experts to split (got {value})")
    if not card.is_moe:
        return
    if dep.ep > experts + dep.redundant_experts:
        raise PlanInputError(
            f"--ep: more expert-parallel ranks than experts (got {dep.ep}, expected <= {experts} "
            f"routed experts of {card.id} + {dep.redundant_experts} redundant)"
        )
    if (experts + dep.redundant_experts) % dep.ep:
        raise PlanInputError(
            f"--ep: {card.id}'s {experts} routed experts + {dep.redundant_experts} redundant do not split "
            f"evenly (got {dep.ep}, expected a divisor of {experts + dep.redundant_experts})"
        )
    if dep.redundant_experts and dep.ep == 1:
        raise PlanInputError(
            f"--redundant-experts: needs expert parallelism (got {dep.redundant_experts} with --ep 1)"
        )
    if (dep.tp * dep.dp) % dep.ep:
        raise PlanInputError(
            f"--ep: the MoE layers run on tp x dp = {dep.tp * dep.dp} ranks per stage (got {dep.ep}, "
            f"expected a divisor of {dep.tp * dep.dp})"
        )


def _check_stages(dep: Deployment) -> None:
    if dep.pp > dep.model.num_hidden_layers:
        raise PlanInputError(
            f"--pp: more pipeline stages than layers (got {dep.pp}, expected <= "
            f"{dep.model.num_hidden_layers} for {dep.model.id})"
        )


def _check_nodes(dep: Deployment) -> None:
    world, per_node = world_size(dep), devices_per_node(dep)
    if dep.nodes is not None and dep.nodes * per_node != world:
        raise PlanInputError(
            f"--nodes: {dep.nodes} nodes x {per_node} devices do not match the layout's {world} devices "
            f"(got {describe(dep)}, expected tp x dp x pp = nodes x devices per node)"
        )
    if world > per_node and world % per_node:
        raise PlanInputError(
            f"--devices-per-node: a {world}-device layout ({describe(dep)}) does not fill whole nodes of "
            f"{per_node} (expected a multiple of {per_node}, or fewer devices than one node)"
        )


def check_layout(dep: Deployment) -> None:
    """Reject layouts the model cannot run: one PlanInputError naming the flag and limit (the engine's own
    refusals: planner/engines/registry.check_layout, called by capacity.check_supported)."""
    if dep.is_tp_only:
        return
    _check_experts(dep)
    _check_stages(dep)
    _check_nodes(dep)


def _kv_note(dep: Deployment) -> str:
    card = dep.model
    if card.attention_traits.latent_kv:
        return (
            f"MLA: the latent cache is replicated on all {dep.tp} TP ranks of a DP group, so --tp adds no KV "
            f"room; --dp {dep.dp} gives {dep.dp} groups, each holding only its own sequences' KV"
        )
    heads = card.num_key_value_heads
    held = kv_heads_per_rank(card, tp=dep.tp)
    how = "replicated" if heads < dep.tp else "split"
    return f"KV heads {how}: {held} of {heads} per rank; each of {dep.dp} DP groups holds its own sequences"


def layout_notes(dep: Deployment, *, batch_per_group: int) -> list[str]:
    """Why the layout holds what it holds: the KV rule, expert shards, buffers and nodes, in words."""
    notes = [_kv_note(dep)]
    if dep.dp > 1:
        notes.append(
            f"max_batch_size is the whole instance: {dep.dp} DP groups x {batch_per_group} sequences "
            f"(memory figures are per device)"
        )
    if dep.model.is_moe:
        total = dep.model.routed_expert_count + dep.redundant_experts
        each = f"split {moe_tp(dep)} ways" if moe_tp(dep) > 1 else "whole (moe_tp=1)"
        rest = f"split tp={dep.tp} ways" if dep.tp > 1 else "whole on every rank (tp=1)"
        notes.append(
            f"routed experts: {experts_per_rank(dep)} of {total} per rank (ep={dep.ep}), each {each}; "
            f"shared experts, dense layers, embedding and lm_head {rest}"
        )
    if comm_buffer_bytes(dep):
        notes.append(
            "comm buffers: MC2 window from the CANN aclnnMoeDistributeDispatch HCCL_BUFFSIZE formula at an "
            f"assumed {MC2_TOKENS_PER_RANK} tokens per rank; other groups HCCL's default 200 MB (assumed)"
        )
    if node_count(dep) > 1:
        notes.append(f"spans {node_count(dep)} nodes of {devices_per_node(dep)} devices")
    return notes


def layout_report(dep: Deployment, *, instance_batch: int, weights_by_part: dict[str, int]) -> LayoutReport:
    """The per-rank layout report of a plan (None-free: call only when not dep.is_tp_only); weights_by_part
    is capacity.weight_bytes_by_part(dep)."""
    group_batch = per_dp_rank_batch(instance_batch, dp=dep.dp)
    return LayoutReport(
        **carried(dep, DEGREES),
        model_type=dep.model.model_type,
        moe_tp=moe_tp(dep),
        world_size=world_size(dep),
        nodes=node_count(dep),
        devices_per_node=devices_per_node(dep),
        experts_per_rank=experts_per_rank(dep),
        redundant_experts=dep.redundant_experts,
        batch_per_dp_group=group_batch,
        weights_by_part_bytes=weights_by_part,
        comm_buffers_bytes=comm_buffer_bytes(dep),
        notes=layout_notes(dep, batch_per_group=group_batch),
    )


def pipeline_microbatch(batch: Any, *, pp: int) -> Any:
    """Sequences of one in-flight microbatch: batch / min(pp, batch) (int or float array; batch when pp = 1).

    With pp stages the engine keeps up to pp microbatches in flight; each passes every stage once per
    token, so TPOT = the whole model's step at this microbatch (stages idle when batch < pp: the bubble).
    """
    if pp == 1:
        return batch
    return batch / np.minimum(pp, np.maximum(batch, 1))
