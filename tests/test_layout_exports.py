"""Layouts in the engines' terms: vllm-ascend arguments, MindIE multi-node fields (engines/layouts.py)."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from planner.cli import app

runner = CliRunner()
QWEN_A3 = ["--model", "qwen3-235b-a22b", "--card", "ascend-910c", "--dtype", "bf16", "--ctx", "5k"]
R1_TWO_NODES = ["--model", "deepseek-r1-0528", "--card", "ascend-910c", "--dtype", "int8", "--ctx", "5k"]
R1_TWO_NODES += ["--tp", "8", "--dp", "4", "--ep", "32"]


def vllm_json(*args: str) -> dict:
    result = runner.invoke(app, ["vllm", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def flags(payload: dict) -> dict[str, str | None]:
    return {flag: value for flag, value in payload["vllm"]["args"]}


def test_vllm_single_node_dp_ep_flags() -> None:
    """vllm-ascend's nightly Qwen3-235B-A22B A3 layout: tp 8, dp 2, expert parallel over all 16 dies."""
    payload = vllm_json(*QWEN_A3, "--tp", "8", "--dp", "2", "--ep", "16", "--memory-fraction", "0.9")
    args = flags(payload)
    assert args["--tensor-parallel-size"] == "8" and args["--data-parallel-size"] == "2"
    assert "--enable-expert-parallel" in args and args["--enable-expert-parallel"] is None
    assert "--data-parallel-size-local" not in args  # one node
    assert int(args["--max-num-seqs"]) >= 32  # the nightly's max_num_seqs per DP engine
    assert any("each of the 2 DP engines" in note for note in payload["vllm"]["notes"])


def test_vllm_multi_node_flags_and_notes() -> None:
    payload = vllm_json(*R1_TWO_NODES, "--redundant-experts", "32")
    args = flags(payload)
    assert args["--data-parallel-size"] == "4" and args["--data-parallel-size-local"] == "2"  # 2 nodes of 16
    # vllm-ascend's default model runner refuses upstream --enable-eplb (platform.py _validate_eplb_config):
    # its own dynamic EPLB, through --additional-config and the DYNAMIC_EPLB guard
    assert "--enable-eplb" not in args and "--eplb-config" not in args
    eplb = json.loads(args["--additional-config"] or "")["eplb_config"]
    assert eplb == {"dynamic_eplb": True, "num_redundant_experts": 32}
    assert ["DYNAMIC_EPLB", "true"] in payload["vllm"]["env"]
    notes = " ".join(payload["vllm"]["notes"])
    assert "--headless --data-parallel-start-rank i x 2" in notes


def test_vllm_on_cuda_spells_redundant_experts_as_upstream_vllm() -> None:
    h200 = ["--model", "qwen3-235b-a22b", "--card", "nvidia-h200", "--dtype", "fp8", "--ctx", "5k"]
    payload = vllm_json(*h200, "--tp", "8", "--ep", "8", "--redundant-experts", "8", "--weights-path", "/w")
    args = flags(payload)
    assert json.loads(args["--eplb-config"] or "") == {"num_redundant_experts": 8} and "--enable-eplb" in args
    assert "--additional-config" not in args and payload["vllm"]["env"] == []


def test_vllm_beyond_the_trained_length_sets_the_override_and_says_why() -> None:
    result = runner.invoke(app, ["vllm", "--model", "qwen3-8b", "--card", "ascend-910c", "--ctx", "64k"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve ")
    assert "beyond qwen3-8b's max_position_embeddings 40960" in " ".join(result.output.split())
    inside = runner.invoke(app, ["vllm", "--model", "qwen3-8b", "--card", "ascend-910c", "--ctx", "32k"])
    assert inside.stdout.startswith("vllm serve ")


def test_mindie_says_its_config_does_not_turn_eplb_on() -> None:
    payload = mindie_json(*R1_TWO_NODES, "--redundant-experts", "32")
    notes = " ".join(payload["mindie"]["notes"])
    assert "does not turn MindIE's EPLB on" in notes and "models.deepseekv2.eplb" in notes


def test_vllm_tp_only_has_no_layout_flags() -> None:
    args = flags(vllm_json("--model", "qwen3-32b", "--card", "ascend-910b4", "--tp", "4"))
    assert not {"--data-parallel-size", "--enable-expert-parallel", "--pipeline-parallel-size"} & set(args)


def mindie_json(*args: str) -> dict:
    result = runner.invoke(app, ["mindie", *args, "--weights-path", "/data/w", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_mindie_multi_node_fields() -> None:
    payload = mindie_json(*R1_TWO_NODES)
    backend = payload["mindie"]["config"]["BackendConfig"]
    model = backend["ModelDeployConfig"]["ModelConfig"][0]
    assert (model["dp"], model["tp"], model["moe_tp"], model["moe_ep"]) == (4, 8, 1, 32)
    assert model["models"] == {"deepseekv2": {"ep_level": 2}}  # MC2 dispatch, as the speed model assumes
    assert backend["multiNodesInferEnabled"] is True
    assert model["worldSize"] == len(backend["npuDeviceIds"][0]) == 16  # one node's dies
    layout = payload["plan"]["layout"]
    assert backend["ScheduleConfig"]["maxBatchSize"] == layout["batch_per_dp_group"]


def test_mindie_tensor_parallelism_wider_than_a_node_writes_a_multi_node_config() -> None:
    """--tp 16 on 8-device 910B3 nodes: MindIE's multi-node form (multiNodesInferEnabled, one node's 8 NPUs,
    the world of 16 from the ranktable), not a one-node config listing 16 device ids; no dp / moe fields for a
    dense plain-tp plan. The plan and the speed model already counted 2 nodes (perf/links.py)."""
    payload = mindie_json("--model", "qwen3-32b", "--card", "ascend-910b3", "--tp", "16")
    backend = payload["mindie"]["config"]["BackendConfig"]
    model = backend["ModelDeployConfig"]["ModelConfig"][0]
    assert backend["multiNodesInferEnabled"] is True
    assert backend["npuDeviceIds"] == [list(range(8))] and model["worldSize"] == 8
    assert not {"dp", "tp", "moe_tp", "moe_ep"} & set(model)
    assert any("multi-node (2 nodes)" in note for note in payload["mindie"]["notes"])
    one_node = mindie_json("--model", "qwen3-32b", "--card", "ascend-910b3", "--tp", "8")["mindie"]["config"]
    assert one_node["BackendConfig"]["multiNodesInferEnabled"] is False


def test_mindie_with_data_parallelism_keeps_one_more_block_back() -> None:
    """MindIE's router takes one block more from npuBlockNum when the model runs with DP (router_impl.py
    initialize(): `if mapping.has_dp(): num_npu_blocks -= 1`, then npuBlockNum = num_npu_blocks - 1): the
    DP plan predicts allocated - 2, the same plan without DP allocated - 1."""
    flags = ("--model", "deepseek-v3", "--card", "ascend-910c", "--dtype", "int8", "--ctx", "4k")
    with_dp = mindie_json(*flags, "--tp", "8", "--dp", "2", "--ep", "16")["mindie"]["prediction"]
    assert with_dp["npu_block_num"] == with_dp["allocated_blocks"] - 2
    tp_only = mindie_json(*flags, "--tp", "16")["mindie"]["prediction"]
    assert tp_only["npu_block_num"] == tp_only["allocated_blocks"] - 1


def test_mindie_single_node_layout_keeps_multi_node_off() -> None:
    payload = mindie_json(*QWEN_A3, "--tp", "8", "--dp", "2", "--ep", "16")
    backend = payload["mindie"]["config"]["BackendConfig"]
    model = backend["ModelDeployConfig"]["ModelConfig"][0]
    assert backend["multiNodesInferEnabled"] is False and model["worldSize"] == 16
    assert "models" not in model or "deepseekv2" not in model.get("models", {})  # ep_level: DeepSeek only
    assert any("DeepSeek only" in note for note in payload["mindie"]["notes"])


def test_mindie_devices_must_cover_the_layout() -> None:
    result = runner.invoke(
        app,
        [
            "mindie",
            *QWEN_A3,
            "--tp",
            "8",
            "--dp",
            "2",
            "--ep",
            "16",
            "--devices",
            "0,1,2,3,4,5,6,7",
            "--weights-path",
            "/w",
        ],
    )
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "expected 16 distinct ids" in result.stderr


def test_a_tp_across_nodes_still_lowers_maxbatchsize_to_what_the_blocks_hold() -> None:
    """A plain --tp wider than a node is one DP group: with an explicit npuMemSize whose whole GiB hold one
    request fewer than the plan, maxBatchSize is lowered to the blocks' count, as on one node."""
    payload = mindie_json(
        "--model", "qwen3-235b-a22b", "--card", "ascend-910b3", "--tp", "16", "--ctx", "8k",
        "--npu-mem-size", "explicit",
    )  # fmt: skip
    batch = payload["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]["maxBatchSize"]
    assert batch <= payload["mindie"]["prediction"]["concurrency"]


def test_a_checkpoint_with_its_own_code_gets_trust_remote_code_in_both_engines() -> None:
    """kimi-k2.5's card says its checkpoint needs its own code (vllm-ascend's tutorial passes
    --trust-remote-code to every `vllm serve`): the vLLM command and MindIE's trustRemoteCode say so; a
    plain Qwen3 card gets neither."""
    kimi = ["--model", "kimi-k2.5", "--card", "ascend-910c", "--dtype", "w4a8", "--tp", "16"]
    assert "--trust-remote-code" in flags(vllm_json(*kimi))
    model = mindie_json(*kimi)["mindie"]["config"]["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert model["trustRemoteCode"] is True
    qwen = ["--model", "qwen3-8b", "--card", "ascend-910b3"]
    assert "--trust-remote-code" not in flags(vllm_json(*qwen))
    model = mindie_json(*qwen)["mindie"]["config"]["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert model["trustRemoteCode"] is False  # the 2.x base's own value


def test_models_import_reads_auto_map_as_trust_remote_code() -> None:
    from planner.importers import hfimport

    config = {
        "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
        "max_position_embeddings": 4096, "tie_word_embeddings": False,
    }  # fmt: skip
    plain = hfimport.card_from_config_dict(config, card_id="t", origin="c.json")
    custom = hfimport.card_from_config_dict(
        {**config, "auto_map": {"AutoConfig": "configuration_x.XConfig"}}, card_id="t", origin="c.json"
    )
    assert (plain.trust_remote_code, custom.trust_remote_code) == (False, True)


def test_plan_says_when_vllm_runs_another_block_size_than_asked() -> None:
    asked = runner.invoke(app, ["--model", "qwen3-8b", "--engine", "vllm", "--block-size", "100", "--json"])
    assert asked.exit_code == 0, asked.output
    plan = json.loads(asked.stdout)
    assert plan["engine_block_size_tokens"] == 128
    assert any(
        w.startswith("--block-size 100: vLLM runs this deployment at 128-token") for w in plan["warnings"]
    )
    default = json.loads(runner.invoke(app, ["--model", "qwen3-8b", "--engine", "vllm", "--json"]).stdout)
    assert not any(w.startswith("--block-size") for w in default["warnings"])


def test_vllm_says_the_mc2_window_needs_a_larger_hccl_buffsize() -> None:
    """DeepSeek with EP 16 on an A3: MC2's dispatch window (~947 MB a rank) is past HCCL's 200 MB default;
    the note names the HCCL_BUFFSIZE to export. A tensor-parallel Qwen3-8B has no MoE dispatch."""
    payload = vllm_json(*R1_TWO_NODES)
    notes = " ".join(payload["vllm"]["notes"])
    window = int(re.search(r"export HCCL_BUFFSIZE=(\d+)", notes).group(1))
    assert 200 < window < 2048
    plain = " ".join(vllm_json("--model", "qwen3-8b", "--card", "ascend-910c")["vllm"]["notes"])
    assert "HCCL_BUFFSIZE=" not in plain


def test_sglang_passes_trust_remote_code_as_the_card_says() -> None:
    minimax = ["--model", "minimax-m3", "--card", "ascend-910c", "--tp", "16", "--dtype", "int8"]
    result = runner.invoke(app, ["sglang", *minimax, "--weights-path", "/w"])
    assert result.exit_code == 0, result.output
    assert "--trust-remote-code" in result.stdout
    plain = runner.invoke(app, ["sglang", "--model", "qwen3-8b", "--card", "ascend-910c"])
    assert "--trust-remote-code" not in plain.stdout
