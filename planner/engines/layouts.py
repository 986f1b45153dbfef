"""Parallel layouts in the engines' own terms (pure): vllm-ascend arguments and MindIE multi-node fields.

vLLM (docs.vllm.ai: data_parallel_deployment, expert_parallel_deployment; vllm.config.parallel):
  --data-parallel-size D          attention DP groups; MoE layers then span tp x dp ranks
  --enable-expert-parallel        experts split over all tp x dp ranks (kvplan's ep = tp x dp)
  --pipeline-parallel-size P      pipeline stages
  --data-parallel-size-local      DP groups on this node (multi-node: with --data-parallel-address,
                                  --data-parallel-rpc-port, and --headless --data-parallel-start-rank on
                                  the other nodes)
  --enable-eplb, --eplb-config    EPLBConfig.num_redundant_experts (redundant experts; upstream vLLM)
vllm-ascend (Model Runner V1, the default: upstream EPLB raises "Upstream EPLB is only supported by Model
Runner V2 on Ascend", vllm_ascend/platform.py _validate_eplb_config @182b75ea):
  --additional-config '{"eplb_config": {"dynamic_eplb": true, "num_redundant_experts": N}}' with
  DYNAMIC_EPLB=true in the environment (the guard the dynamic mode asserts; docs user_guide/feature_guide/
  expert_parallelism_load_balancer, eplb_config keys since the rename of init_redundancy_expert)
MindIE (ModelConfig; the MindIE-LLM runner takes dp, tp, moe_tp, moe_ep; "Expert Parallel" doc:
models.deepseekv2.ep_level 2 = AllToAll + MC2; multi-node: BackendConfig.multiNodesInferEnabled, the
world taken from the ranktable, worldSize ignored):
  ModelConfig[0].dp / tp / moe_tp / moe_ep   the layout's degrees
  worldSize, npuDeviceIds          the devices of one node
"""

from __future__ import annotations

import json
from typing import Any

from planner.results import LayoutReport

MODEL_CONFIG = ("BackendConfig", "ModelDeployConfig", "ModelConfig", 0)
BACKEND = ("BackendConfig",)
# MindIE's ep_level for MoE dispatch: 2 = AllToAll with computation-communication fusion (MC2), what
# kvplan's moe.dispatch term models. [DOC: MindIE LLM "Expert Parallel", ep_level in [1, 2]]
MINDIE_EP_LEVEL = 2
MINDIE_EP_LEVEL_MODELS = ("deepseek_v3", "deepseek_v2", "deepseek_v32")


def devices_on_one_node(report: LayoutReport) -> int:
    """Devices of the instance on one node: the world size, or the node size when it spans nodes."""
    return report.world_size if report.nodes == 1 else report.devices_per_node


def vllm_layout_args(report: LayoutReport, *, ascend: bool) -> list[tuple[str, str | None]]:
    """The vllm serve flags of a layout beyond --tensor-parallel-size (head node's command); redundant
    experts in vllm-ascend's spelling on an Ascend card (ascend), else upstream vLLM's."""
    args: list[tuple[str, str | None]] = []
    if report.pp > 1:
        args.append(("--pipeline-parallel-size", str(report.pp)))
    if report.dp > 1:
        args.append(("--data-parallel-size", str(report.dp)))
        if report.nodes > 1:
            args.append(("--data-parallel-size-local", str(report.dp // report.nodes)))
    if report.ep > 1:
        args.append(("--enable-expert-parallel", None))
    if report.redundant_experts and ascend:
        eplb = {"eplb_config": {"dynamic_eplb": True, "num_redundant_experts": report.redundant_experts}}
        args.append(("--additional-config", json.dumps(eplb, separators=(",", ":"))))
    elif report.redundant_experts:
        spec = json.dumps({"num_redundant_experts": report.redundant_experts}, separators=(",", ":"))
        args += [("--enable-eplb", None), ("--eplb-config", spec)]
    return args


def vllm_layout_env(report: LayoutReport, *, ascend: bool) -> list[tuple[str, str]]:
    """Environment the layout's command needs: vllm-ascend's DYNAMIC_EPLB=true guard (redundant experts)."""
    return [("DYNAMIC_EPLB", "true")] if report.redundant_experts and ascend else []


def vllm_layout_notes(report: LayoutReport) -> list[str]:
    """What the printed head-node command leaves to the user: the other nodes, per-DP-engine limits."""
    notes = []
    if report.dp > 1:
        notes.append(
            f"--max-num-seqs applies to each of the {report.dp} DP engines: the instance holds "
            f"{report.dp} x {report.batch_per_dp_group} sequences"
        )
    if report.nodes > 1 and report.dp > 1:
        local = report.dp // report.nodes
        notes.append(
            f"multi-node: add --data-parallel-address HEAD_IP --data-parallel-rpc-port PORT on every "
            f"node; node i (1..{report.nodes - 1}) also takes --headless "
            f"--data-parallel-start-rank i x {local}"
        )
    elif report.nodes > 1:
        notes.append(
            "multi-node without DP: vLLM spans nodes with a Ray cluster (--distributed-executor-backend ray)"
        )
    if report.redundant_experts:
        notes.append(
            f"{report.redundant_experts} redundant experts: vllm-ascend places them by dynamic EPLB "
            "(--additional-config eplb_config, DYNAMIC_EPLB=true); upstream vLLM (CUDA) by --enable-eplb "
            "--eplb-config, which vllm-ascend's default model runner refuses"
        )
    return notes


def mindie_layout_values(report: LayoutReport, *, model_type: str) -> dict[tuple[str | int, ...], Any]:
    """MindIE config fields of a layout, by path (merged after the tensor-parallel fields)."""
    per_node = devices_on_one_node(report)
    values: dict[tuple[str | int, ...], Any] = {(*MODEL_CONFIG, "worldSize"): per_node}
    if (report.dp, report.ep) != (1, 1):  # a plain tp across nodes takes its tp from the ranktable's world
        values |= {
            (*MODEL_CONFIG, "dp"): report.dp,
            (*MODEL_CONFIG, "tp"): report.tp,
            (*MODEL_CONFIG, "moe_tp"): report.moe_tp,
            (*MODEL_CONFIG, "moe_ep"): report.ep,
        }
    if report.ep > 1 and model_type in MINDIE_EP_LEVEL_MODELS:
        values[(*MODEL_CONFIG, "models")] = {"deepseekv2": {"ep_level": MINDIE_EP_LEVEL}}
    if report.nodes > 1:
        values[(*BACKEND, "multiNodesInferEnabled")] = True
    return values


def mindie_layout_notes(report: LayoutReport, *, model_type: str) -> list[str]:
    """What MindIE needs besides config.json for this layout, and what kvplan assumed."""
    notes = []
    if (report.dp, report.ep) != (1, 1):
        notes.append(
            f"layout: dp {report.dp} x tp {report.tp}, moe_ep {report.ep} x moe_tp {report.moe_tp} in "
            f"ModelConfig; maxBatchSize is one DP group's {report.batch_per_dp_group} "
            f"(assumed: MindIE schedules each DP group's batch on its own)"
        )
    if report.ep > 1 and model_type not in MINDIE_EP_LEVEL_MODELS:
        notes.append(
            f"moe_ep: MindIE documents expert parallelism (ep_level) for DeepSeek only, not {model_type}"
        )
    if report.redundant_experts:
        notes.append(
            f"--redundant-experts {report.redundant_experts}: the plan counts the copies' memory (a smaller "
            "maxBatchSize), but this config.json does not turn MindIE's EPLB on: static redundancy needs "
            "models.deepseekv2.eplb level 1 with an expert_map_file that msit elb builds from the experts' "
            "hot-spot dump of your own traffic (MINDIE_ENABLE_EXPERT_HOTPOT_GATHER), and ep_level 2; "
            "MindIE-LLM docs/zh/user_guide/feature/expert_parallelism_load_balancer.md"
        )
    if report.nodes > 1:
        notes.append(
            f"multi-node ({report.nodes} nodes): multiNodesInferEnabled true; MindIE takes the world from "
            f"the ranktable (RANK_TABLE_FILE); worldSize and npuDeviceIds list one node's "
            f"{report.devices_per_node} NPUs"
        )
    return notes
