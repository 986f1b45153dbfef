"""Parallel layouts beyond TP (planner/layout.py): the vllm-ascend nightly MoE layouts fit, DP attention
multiplies MLA concurrency, impossible layouts get one line each, and tp-only plans are untouched."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from planner import capacity, catalog, layout, params
from planner.cli import app
from planner.errors import PlanInputError
from planner.inputs import PlanRequest, to_deployment
from planner.plan.compose import build_plan

runner = CliRunner()


def plan_json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# vllm-ascend nightly single-node A3 configs (lab/published/ascend-serving.csv): model, dtype,
# tp/dp/ep, max_num_seqs per DP engine, input + output tokens, max_num_batched_tokens, MTP draft tokens.
NIGHTLY_A3 = [
    # Qwen3-235B-A22B bf16, tp8 dp2 EP16 (Qwen3-235B-A22B-Mooncake-Layerwise.yaml: max_num_seqs 32)
    ("qwen3-235b-a22b", "bf16", (8, 2, 16), 32, 3500 + 1500, 8192, 0),
    # DeepSeek-R1-0528 W8A8, tp8 dp2 EP16, MTP 1 (DeepSeek-R1-0528-W8A8.yaml: max_num_seqs 16)
    ("deepseek-r1", "int8", (8, 2, 16), 16, 3500 + 1500, 4096, 1),
    # Qwen3.5-397B-A17B W8A8, tp16 EP16, MTP 3 (Qwen3.5-397B-A17B-W8A8-mtp-A3.yaml: max_num_seqs 32)
    ("qwen3.5-397b-a17b", "int8", (16, 1, 16), 32, 3500 + 1500, 16384, 3),
]


@pytest.mark.parametrize(("model", "dtype", "degrees", "seqs", "ctx", "prefill", "mtp"), NIGHTLY_A3)
def test_nightly_a3_moe_layouts_fit_with_itemised_ranks(
    model, dtype, degrees, seqs, ctx, prefill, mtp
) -> None:
    tp, dp, ep = degrees
    args = ["--model", model, "--card", "ascend-910c", "--dtype", dtype, "--engine", "vllm"]
    args += ["--tp", str(tp), "--dp", str(dp), "--ep", str(ep), "--ctx", str(ctx)]
    args += ["--max-prefill-tokens", str(prefill), "--mtp", str(mtp), "--memory-fraction", "0.9"]
    plan = plan_json(*args)  # vllm-ascend's nightly runs at gpu_memory_utilization 0.9
    report = plan["layout"]
    assert report["world_size"] == 16 and report["nodes"] == 1  # one A3 node = 16 dies
    assert report["batch_per_dp_group"] >= seqs  # the engine's max_num_seqs fits each DP group
    assert plan["recommendation"]["max_batch_size"] == dp * report["batch_per_dp_group"]
    parts = report["weights_by_part_bytes"]
    assert sum(parts.values()) == plan["memory"]["weights_bytes"]  # itemised, and the items add up
    card = catalog.resolve_model(model)[0]
    assert report["experts_per_rank"] == card.routed_expert_count // ep
    assert parts["moe_experts"] > parts["attention"]  # the experts dominate a rank even at EP16
    assert "MC2 dispatch/combine window" in report["comm_buffers_bytes"]


def test_layout_buffers_print_under_the_runtime_row_they_are_part_of() -> None:
    """The MC2 window is part of the runtime reserve: its row follows the runtime row, never the weights'
    parts, and is no larger than the runtime it is part of."""
    args = ["--model", "deepseek-v3", "--card", "ascend-910c", "--dtype", "int8", "--tp", "8", "--dp", "2"]
    args += ["--ep", "16", "--ctx", "8k"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("│")]
    names = [line.split("│")[1].strip() for line in lines]
    at = names.index("MC2 dispatch/combine window")
    assert names[at - 1] == "runtime" and "layout's buffers marked so" in lines[at - 1]
    assert "part of runtime (layout)" in lines[at]
    plan = plan_json(*args)
    window = plan["layout"]["comm_buffers_bytes"]["MC2 dispatch/combine window"]
    assert 0 < window <= plan["memory"]["runtime_bytes"]


def buffer_notes(args: list[str]) -> dict[str, str]:
    """The plan table's layout-buffer rows under the runtime row: name -> note."""
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    cells = [line.split("│")[1:4] for line in result.stdout.splitlines() if line.startswith("│")]
    at = next(i for i, (name, _, _) in enumerate(cells) if name.strip() == "runtime")
    notes = {}
    for name, _, note in cells[at + 1 :]:
        if not name.startswith("   "):  # the next top-level row: the runtime's sub-rows are over
            break
        notes[name.strip()] = note.strip()
    return notes


KIMI_A3 = [
    "--model",
    "kimi-k2.5",
    "--card",
    "ascend-910c",
    "--dtype",
    "w4a16-moe",
    "--tp",
    "16",
    "--ep",
    "16",
]


def test_under_vllm_the_mc2_window_is_counted_at_hccls_default_and_points_at_kvplan_vllm() -> None:
    """vLLM's runtime is its start-up arithmetic, which counts each HCCL group at the default HCCL_BUFFSIZE:
    the MC2 window (here larger than that whole runtime) says so and points at `kvplan vllm`."""
    args = [*KIMI_A3, "--ctx", "2k", "--engine", "vllm"]
    notes = buffer_notes(args)
    assert (
        "HCCL_BUFFSIZE" in notes["MC2 dispatch/combine window"]
        and "kvplan vllm" in notes["MC2 dispatch/combine window"]
    )
    plan = plan_json(*args)
    assert (
        plan["layout"]["comm_buffers_bytes"]["MC2 dispatch/combine window"] > plan["memory"]["runtime_bytes"]
    )


def test_vllms_pipeline_group_is_one_more_hccl_communicator_in_its_runtime() -> None:
    """With --pp the pipeline group's HCCL buffers are part of vLLM's non-torch memory (2 x 200 MB a rank),
    counted by vLLM's own rule: the row points at `kvplan vllm`, and the start-up arithmetic counts one more
    communicator."""
    args = ["--model", "kimi-k2.5", "--card", "ascend-910b3", "--tp", "8", "--pp", "2", "--ep", "8"]
    args += ["--dtype", "w4a16-moe", "--engine", "vllm"]
    assert "kvplan vllm" in buffer_notes(args)["pipeline communicator"]
    from planner.engines.vllm import terms

    with_pp = terms.hccl_communicators(tp=8, moe=True, ep=True, pp=2)
    assert with_pp == terms.hccl_communicators(tp=8, moe=True, ep=True) + 1


def runtime_and_buffers(*args: str) -> tuple[int, dict[str, int]]:
    plan = plan_json(*args)
    return plan["memory"]["runtime_bytes"], (plan.get("layout") or {}).get("comm_buffers_bytes", {})


@pytest.mark.parametrize(
    ("base", "flag", "buffer"),
    [
        (["--model", "qwen3-8b", "--card", "ascend-910b3"], "--pp", layout.PIPELINE_BUFFER),
        (["--model", "qwen3-30b-a3b", "--card", "nvidia-h200"], "--dp", layout.EXPERT_GROUP_BUFFER),
    ],
)
def test_under_vllm_a_group_buffer_is_not_called_part_of_a_runtime_that_counts_it_otherwise(
    base: list[str], flag: str, buffer: str
) -> None:
    """vLLM's runtime row is its start-up non-torch memory: a pipeline group adds 2 x HCCL_BUFFSIZE there,
    not the layout's one buffer, and CUDA counts no expert-group buffer; the sub-row said 'part of runtime
    (layout)' at the layout's figure all the same. It now says the figure is not added."""
    args = [*base, "--engine", "vllm"]
    alone, _ = runtime_and_buffers(*args)
    runtime, buffers = runtime_and_buffers(*args, flag, "2")
    assert runtime - alone != buffers[buffer]  # the row's figure is not what the runtime grew by
    note = buffer_notes([*args, flag, "2"])[buffer]
    assert "part of runtime" not in note and "kvplan vllm" in note


def test_under_sglang_every_layout_buffer_is_said_to_be_outside_the_figures() -> None:
    args = ["--model", "deepseek-v3", "--card", "ascend-910c", "--dtype", "int8", "--tp", "8", "--dp", "2"]
    notes = buffer_notes([*args, "--ep", "16", "--ctx", "8k", "--engine", "sglang"])
    assert notes and all("not in these figures" in note for note in notes.values())


def test_qwen3_235b_tp8_alone_does_not_fit_but_ep_does() -> None:
    """The issue's complaint: bf16 tp 8 needs ~58.6 GiB per die; spreading experts over 16 dies fits."""
    base = ["--model", "qwen3-235b-a22b", "--card", "ascend-910c", "--dtype", "bf16", "--ctx", "5k"]
    assert runner.invoke(app, [*base, "--tp", "8"]).exit_code == 3
    assert runner.invoke(app, [*base, "--tp", "8", "--dp", "2", "--ep", "16", "--json"]).exit_code == 0


def test_deepseek_v3_dp_attention_holds_more_sequences_than_tp16_and_says_why() -> None:
    base = ["--model", "deepseek-v3", "--card", "ascend-910c", "--dtype", "int8", "--ctx", "4k"]
    tp16 = plan_json(*base, "--tp", "16")
    dp2 = plan_json(*base, "--tp", "8", "--dp", "2", "--ep", "16")
    # same KV per token per device (MLA latent replicated over TP ranks), dp = 2 groups of sequences
    assert dp2["memory"]["kv_bytes_per_token"] == tp16["memory"]["kv_bytes_per_token"]
    ratio = dp2["recommendation"]["max_batch_size"] / tp16["recommendation"]["max_batch_size"]
    assert ratio >= 1.8
    notes = " ".join(dp2["layout"]["notes"])
    assert "MLA" in notes and "replicated" in notes and "DP groups" in notes
    text = runner.invoke(app, [*base, "--tp", "8", "--dp", "2", "--ep", "16"]).stdout
    assert "why: MLA" in text and "2 DP groups" in text


IMPOSSIBLE = [
    (["--model", "qwen3-8b", "--tp", "2", "--ep", "2"], "--ep: qwen3-8b is a dense model"),
    (["--model", "qwen3-30b-a3b", "--tp", "16", "--dp", "16", "--ep", "256"], "--ep: more expert-parallel"),
    (["--model", "qwen3-235b-a22b", "--tp", "4", "--dp", "3", "--ep", "12"], "do not split evenly"),
    (["--model", "qwen3-235b-a22b", "--tp", "8", "--ep", "16"], "--ep: the MoE layers run on tp x dp = 8"),
    (
        ["--model", "qwen3-235b-a22b", "--tp", "8", "--dp", "2", "--ep", "4", "--engine", "vllm"],
        "expected 1 or 16",
    ),
    (["--model", "qwen3-32b", "--tp", "8", "--pp", "2"], "--pp: kvplan knows no MindIE"),
    (["--model", "qwen3-0.6b", "--pp", "64", "--engine", "vllm"], "--pp: more pipeline stages than layers"),
    (["--model", "qwen3-235b-a22b", "--tp", "8", "--redundant-experts", "16"], "--redundant-experts: needs"),
    (
        ["--model", "qwen3-235b-a22b", "--tp", "8", "--dp", "2", "--ep", "16", "--nodes", "2"],
        "--nodes: 2 nodes",
    ),
    (["--model", "qwen3-32b", "--tp", "8", "--dp", "3", "--devices-per-node", "16"], "whole nodes of 16"),
    (["--model", "qwen3-32b", "--tp", "6"], "--tp: 6 cannot shard qwen3-32b: 64 attention heads"),
    (
        ["--model", "qwen3-32b", "--tp", "2", "--dp", "2", "--engine", "transformers"],
        "tensor parallelism within one node only",
    ),
    (["--model", "qwen3-32b", "--dp", "0"], "--dp: out of range (got 0"),
]


@pytest.mark.parametrize(("args", "message"), IMPOSSIBLE)
def test_impossible_layouts_get_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, [*args, "--card", "ascend-910c"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: ")
    assert message in lines[0]
    assert "Traceback" not in result.output


def test_tp_only_plan_has_no_layout_key_and_default_shards_change_nothing() -> None:
    plan = plan_json("--model", "qwen3-30b-a3b", "--card", "ascend-910c", "--tp", "4")
    assert "layout" not in plan
    card = catalog.load_model("qwen3-30b-a3b")
    default = params.model_tensors(card, tp=4)
    explicit = params.model_tensors(card, tp=4, shards=params.tp_only_shards(card, tp=4))
    assert default == explicit


def test_dp_on_a_dense_model_is_replicas_with_the_same_memory_per_device() -> None:
    one = to_deployment(PlanRequest(model="qwen3-32b", card="ascend-910c", tp=2))
    two = to_deployment(PlanRequest(model="qwen3-32b", card="ascend-910c", tp=2, dp=2))
    assert capacity.memory_breakdown(one) == capacity.memory_breakdown(two)
    plan_one, plan_two = build_plan(one), build_plan(two)
    assert plan_two.recommendation.max_batch_size == 2 * plan_one.recommendation.max_batch_size
    assert plan_two.performance is not None and plan_one.performance is not None
    assert plan_two.performance.tokens_per_s == pytest.approx(2 * plan_one.performance.tokens_per_s)


def test_batch_flag_is_the_instance_batch_split_over_dp_groups() -> None:
    dep = to_deployment(
        PlanRequest(model="deepseek-v3", card="ascend-910c", dtype="int8", tp=8, dp=2, ep=16, batch=5)
    )
    plan = build_plan(dep)
    assert plan.recommendation.max_batch_size == 5
    assert plan.layout is not None and plan.layout.batch_per_dp_group == 3  # ceil(5 / 2)


def test_redundant_experts_add_copies_per_rank() -> None:
    """EPLB: 256 routed + 16 redundant over ep 16 = 17 experts per rank (one more than without)."""
    plain = to_deployment(
        PlanRequest(model="deepseek-v3", card="ascend-910c", dtype="int8", tp=8, dp=2, ep=16)
    )
    eplb = to_deployment(
        PlanRequest(
            model="deepseek-v3", card="ascend-910c", dtype="int8", tp=8, dp=2, ep=16, redundant_experts=16
        )
    )
    assert layout.experts_per_rank(plain) == 16 and layout.experts_per_rank(eplb) == 17
    per_expert = (
        capacity.weight_bytes_by_part(eplb)["moe_experts"]
        - capacity.weight_bytes_by_part(plain)["moe_experts"]
    ) // plain.model.moe_layers
    # one expert of one layer: gate_up (2 * 2048 x 7168) + down (7168 x 2048) int8 + per-channel scales
    assert per_expert > 3 * 2048 * 7168


def test_pipeline_stage_holds_ceil_layers_and_one_vocabulary_matrix() -> None:
    card = catalog.load_model("qwen3-32b")  # 64 layers, untied embeddings
    dep = to_deployment(PlanRequest(model="qwen3-32b", card="ascend-910b4", tp=2, pp=3, engine="vllm"))
    tensors = params.model_tensors(card, tp=2, shards=layout.shards(dep))
    norms = next(t for t in tensors if t.name == "layer_norms")
    assert norms.count == 22  # ceil(64 / 3)
    assert not any(t.name == "lm_head" for t in tensors)


def test_nodes_follow_the_card_profile_node_size() -> None:
    dep = to_deployment(
        PlanRequest(model="deepseek-v3", card="ascend-910b4", dtype="int8", tp=8, dp=4, ep=32, nodes=4)
    )
    capacity.check_supported(dep)
    assert layout.node_count(dep) == 4 and layout.devices_per_node(dep) == 8
    with pytest.raises(PlanInputError, match=r"^--nodes: 3 nodes x 8 devices"):
        capacity.check_supported(dep.model_copy(update={"nodes": 3}))


@pytest.mark.parametrize(
    ("degrees", "experts", "rest"),
    [
        ({"tp": 8, "dp": 2, "ep": 16}, "each whole (moe_tp=1)", "split tp=8 ways"),
        ({"tp": 8, "dp": 2, "ep": 8}, "each split 2 ways", "split tp=8 ways"),
        ({"tp": 1, "dp": 16, "ep": 16}, "each whole (moe_tp=1)", "whole on every rank (tp=1)"),
    ],
)
def test_why_line_never_splits_one_way(degrees: dict[str, int], experts: str, rest: str) -> None:
    """moe_tp = tp x dp / ep: 16 / 16 = 1 is no split at all ("each split 1 ways" before), 16 / 8 = 2 is."""
    dep = to_deployment(
        PlanRequest(model="deepseek-v3", card="ascend-910c", dtype="int8", ctx="4k", **degrees)
    )
    (line,) = [note for note in layout.layout_notes(dep, batch_per_group=1) if note.startswith("routed")]
    assert f"(ep={degrees['ep']}), {experts};" in line
    assert line.endswith(f"embedding and lm_head {rest}")
    assert " 1 ways" not in line
