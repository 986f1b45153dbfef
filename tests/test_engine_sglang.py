"""SGLang's engine room (planner/engines/sglang/): its default arithmetic against hand-worked cases from
SGLang's source (server_args.py _handle_gpu_memory_settings, hardware_backend/npu/utils.py
set_default_server_args, model_runner profile_max_num_token; citations in defaults.py), its registry
dispatch, its scheduler in the simulator and the CLI's --engine sglang."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from planner import capacity, inputs
from planner.cli import app
from planner.engines import registry
from planner.engines.sglang import defaults, room
from planner.inputs import PlanRequest
from planner.kinds import parse_engine

runner = CliRunner()
# A 64 GB 910B3 die: the runtime sees 65 452 113 920 B (hwprofiles/ascend-910b3.yaml visible_memory_bytes).
VISIBLE_910B3_BYTES = 65_452_113_920


def qwen3_32b_910b3(**fields: object) -> object:
    request = PlanRequest(
        model="qwen3-32b", card="ascend-910b3", dtype="int8", tp=4, ctx="5000", engine="sglang", **fields
    )
    return inputs.to_deployment(request)


def test_npu_defaults_by_memory_and_tp() -> None:
    # [NPU] <= 32 GiB: 4096 tokens, graph bs 16 | 64; <= 64 GiB: 8192, 64 | 256 (tp < 4 | tp >= 4)
    assert defaults.chunk_and_graph_bs(30 * 1024, tp=2, npu=True) == (4096, 16)
    assert defaults.chunk_and_graph_bs(30 * 1024, tp=8, npu=True) == (4096, 64)
    assert defaults.chunk_and_graph_bs(62_420, tp=1, npu=True) == (8192, 64)
    assert defaults.chunk_and_graph_bs(62_420, tp=4, npu=True) == (8192, 256)
    # above 64 GiB the NPU falls through to the GPU table ([SA]: 90..160 GiB -> 8192, 256 | 512)
    assert defaults.chunk_and_graph_bs(96 * 1024, tp=1, npu=True) == (8192, 256)
    assert defaults.chunk_and_graph_bs(80 * 1024, tp=8, npu=False) == (8192, 512)  # an H100
    assert defaults.chunk_and_graph_bs(180 * 1024, tp=8, npu=False) == defaults.LARGEST_GPU


def test_mem_fraction_static_hand_worked_910b3_tp4() -> None:
    """gpu_mem = 65 452 113 920 // 2**20 = 62 420 MiB; chunk 8192, graph bs 256 (tp 4);
    reserved = 512 + 1.5 * 8192 + 2 * 256 + 4 * 1 / 8 * 1024 = 512 + 12 288 + 512 + 512 = 13 824 MiB
    (above the 10 240 floor of a > 60 GiB card);
    f = round((62 420 - 13 824) / 62 420, 3) = round(0.77853, 3)."""
    mib = defaults.device_mib(VISIBLE_910B3_BYTES)
    assert mib == 62_420
    reserved = defaults.reserved_mib(mib, chunk_tokens=8192, graph_bs=256, ranks=(4, 1, 1), drafting=False)
    assert reserved == 13_824
    assert defaults.mem_fraction_static(mib, reserved=reserved) == 0.779
    # the floor: tp 1, chunk 2048, bs 64 -> 512 + 3072 + 128 + 128 = 3840, raised to 10 240 on a 61 GiB card
    small = defaults.reserved_mib(mib, chunk_tokens=2048, graph_bs=64, ranks=(1, 1, 1), drafting=False)
    assert small == 10_240
    # DP attention (dp 16, bs 256): + 3 * 256 * 16 = 12 288; an EAGLE draft + 2048
    dp = defaults.reserved_mib(mib, chunk_tokens=8192, graph_bs=256, ranks=(16, 1, 16), drafting=True)
    assert dp == 512 + 12_288 + 512 + 16 / 8 * 1024 + 3 * 256 * 16 + 2048


def test_plan_uses_the_formula_and_the_pool_hand_worked() -> None:
    """Qwen3-32B int8 tp 4 on a 910B3 with no --memory-fraction: f = 0.779 (above). KV pool:
    rest = floor((65 452 113 920 - 644 245 094) * 0.779) - W = 50 485 329 815 - 8 600 332 288
         = 41 884 997 527 B
    (c = runtime_overhead 0.6 GiB; W = kvplan's int8 weights per rank); cell = 8 / 4 heads * 128 * 64 layers
    * 2 (K, V) * 2 B = 65 536 B; N = 41 884 997 527 // 65 536 = 639 114, in whole 128-token pages 639 104.
    At ctx 5000 a sequence holds ceil(5000 / 128) = 40 pages = 5120 tokens: 639 104 // 5120 = 124."""
    dep = qwen3_32b_910b3()
    assert dep.memory_fraction == 0.779
    assert dep.max_prefill_tokens == 8192  # --chunked-prefill-size's default on the card
    mem, rec = capacity.memory_plan(dep)
    assert mem.weights_bytes == 8_600_332_288
    assert mem.kv_budget_bytes == 41_884_997_527
    assert mem.kv_bytes_per_token == 65_536
    assert room.pool_tokens(dep, mem) == 639_104
    assert rec.max_batch_size == 124
    assert mem.activation_bytes == 0  # activations live in the 1 - f SGLang holds back


def test_given_fraction_wins_and_max_running_requests_defaults() -> None:
    assert qwen3_32b_910b3(memory_fraction=0.72).memory_fraction == 0.72
    # [TPW]: min(N // 2, clamp(int(N / context * 512), 2048, 4096)); [SPEC]: 48 // attention-DP ranks
    assert (
        defaults.default_max_running_requests(639_104, context_tokens=40_960, attention_dp=1, drafting=False)
        == 4096
    )
    assert (
        defaults.default_max_running_requests(100_000, context_tokens=40_960, attention_dp=1, drafting=False)
        == 2048
    )
    assert (
        defaults.default_max_running_requests(3_000, context_tokens=40_960, attention_dp=1, drafting=False)
        == 1500
    )
    assert defaults.default_max_running_requests(0, context_tokens=1, attention_dp=16, drafting=True) == 3
    spec = qwen3_32b_910b3(speculative_config='{"method": "eagle3", "num_speculative_tokens": 3}')
    assert registry.default_max_batch(spec, planned_batch=100) == 48
    # no drafts: N taken as 124 x 5000 = 620 000 tokens -> min(310 000, clamp(63 488, 2048, 4096)) = 4096
    assert registry.default_max_batch(qwen3_32b_910b3(), planned_batch=124) == 4096


def test_registry_dispatches_sglang() -> None:
    engine = parse_engine("SGLang")
    assert registry.room(engine) is room
    dep = qwen3_32b_910b3()
    assert registry.scheduler_for(dep) == "sglang"
    assert registry.fitted_profile_engine(engine) == "vllm"
    assert registry.default_prefill_tokens(engine, dep.hardware) == 8192
    assert registry.prefix_cache_block_tokens(dep) == 128
    assert registry.beyond_pool_words(engine, max_batch=48, clients=60).startswith(
        "SGLang admits up to max_running_requests 48, allocates"
    )
    mem, _ = capacity.memory_plan(dep)
    pool = registry.block_pool(dep, mem, max_model_len=5000)
    assert (pool.total_blocks, pool.block_tokens) == (639_104 // 128, 128)
    grid = registry.max_batch_grid(dep, mem, ctx_tokens=np.asarray([5000, 10_000]))
    assert grid.tolist() == [124, 639_104 // (79 * 128)]


def test_cli_plan_serve_simulate_layout_take_engine_sglang() -> None:
    common = ["-m", "qwen3-32b", "--card", "ascend-910b3", "--dtype", "int8", "--engine", "sglang"]
    plan = runner.invoke(app, [*common, "--tp", "4", "--ctx", "5000"])
    assert plan.exit_code == 0, plan.output[-400:]
    assert "max_total_num_tokens=639104" in plan.output
    served = runner.invoke(
        app, ["serve", *common, "--tp", "4", "--input-tokens", "3500", "--output-tokens", "1500",
              "--concurrency", "78", "--json"],
    )  # fmt: skip
    assert served.exit_code == 0, served.output[-400:]
    assert json.loads(served.output)["estimate"]["running_batch"] == 78
    simulated = runner.invoke(
        app, ["simulate", *common, "--tp", "4", "--input-tokens", "20000", "--output-tokens", "64",
              "--concurrency", "4", "--requests", "8", "--json"],
    )  # fmt: skip
    assert simulated.exit_code == 0, simulated.output[-400:]  # a 20k prompt is chunked, not refused
    assert json.loads(simulated.output)["scheduler"]["scheduler"] == "sglang"
    laid = runner.invoke(app, ["layout", *common, "--ctx", "5000", "--budget-devices", "8"])
    assert laid.exit_code == 0, laid.output[-400:]


@pytest.mark.parametrize(
    "flags",
    [
        ["-m", "qwen3-32b", "--card", "ascend-910b3", "--tp", "8", "--max-prefill-tokens", "65536"],
        ["-m", "qwen3-8b", "--memory-gib", "4"],  # SGLang's reserve alone (6 816 MiB) is more than the card
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["--engine", "sglang"],
        ["serve", "--engine", "sglang", "--concurrency", "1"],
        ["sglang", "--weights-path", "/w"],
    ],
)
def test_a_default_fraction_below_zero_is_refused_in_one_line(command: list[str], flags: list[str]) -> None:
    """SGLang's mem_fraction_static formula goes negative when its reserve (1.5 MiB per chunked-prefill
    token: 65 536 tokens -> 96 GiB; or a 4 GiB card) exceeds the device: the plan ended in a pydantic
    traceback (exit 1), `kvplan sglang` blamed a --memory-fraction nobody gave. A given fraction plans."""
    result = runner.invoke(app, [*command, *flags])
    assert result.exit_code == 2, result.output[-400:]
    assert "SGLang's default --mem-fraction-static" in result.output
    assert "give --memory-fraction" in result.output
    assert "Traceback" not in result.output and "validation error" not in result.output
    given = runner.invoke(app, [*command, *flags, "--memory-fraction", "0.72"])
    assert "SGLang's default" not in given.output


@pytest.mark.parametrize("ep", ["2"])
def test_ep_must_span_the_group(ep: str) -> None:
    result = runner.invoke(
        app, ["-m", "qwen3-30b-a3b", "--card", "ascend-910c", "--engine", "sglang", "--tp", "4", "--ep", ep]
    )
    assert result.exit_code == 2
    assert "--ep: SGLang's --ep-size" in result.output


def test_sglang_command_writes_the_launch_command() -> None:
    flags = ["-m", "qwen3-32b", "--card", "ascend-910b3", "--dtype", "int8", "--tp", "4", "--ctx", "5000"]
    result = runner.invoke(app, ["sglang", *flags, "--weights-path", "/w", "--json"])
    assert result.exit_code == 0, result.output[-400:]
    payload = json.loads(result.output)
    args = dict(payload["sglang"]["args"])
    assert payload["command"].startswith("python -m sglang.launch_server --model-path /w")
    assert args["--max-running-requests"] == "124"  # the plan's batch (test above)
    assert args["--mem-fraction-static"] == "0.779"
    assert (args["--tp-size"], args["--page-size"], args["--quantization"]) == ("4", "128", "modelslim")
    dp = runner.invoke(
        app, ["sglang", "-m", "qwen3-30b-a3b", "--card", "ascend-910c", "--dtype", "int8", "--tp", "2",
              "--dp", "2", "--ep", "4", "--ctx", "5000", "--mtp", "0", "--weights-path", "/w", "--json"],
    )  # fmt: skip
    assert dp.exit_code == 0, dp.output[-400:]
    words = dict(json.loads(dp.output)["sglang"]["args"])
    assert (words["--tp-size"], words["--dp-size"], words["--ep-size"]) == ("4", "2", "4")
    assert "--enable-dp-attention" in words


def sglang_engine(prompts: list[int], outputs: list[int], arrivals: list[float]) -> object:
    """An SGLang engine for qwen3-8b on the 950PR run to completion (chunk 8192: the default of a 64 GiB
    die is what --max-prefill-tokens sets here)."""
    from planner.sim import instance, run
    from planner.sim import workload as wl
    from tests.helpers import deployment_950pr

    work = wl.Workload(np.array(prompts), np.array(outputs), np.array(arrivals), None)
    dep = deployment_950pr("qwen3-8b", engine="sglang", ctx_tokens=int(max(prompts) + max(outputs)))
    dep = dep.model_copy(update={"max_prefill_tokens": 8192})
    cfg = run.default_config(dep, workload=work, max_batched_tokens=8192)
    assert cfg.scheduler == "sglang"
    return instance.run_engine(cfg, run.build_table(dep, cfg, work), work)


def test_sglang_prefills_in_chunks_and_never_mixes_decodes_in() -> None:
    """get_next_batch_to_run with --enable-mixed-chunk off: 4 requests decode; a 20 000-token prompt arriving
    at 1 s is prefilled from the next step boundary in 3 back-to-back passes of 8192, 8192 and 3616 tokens
    (the chunked request continues first, PrefillAdder), the decodes paused: its first token comes exactly
    3 passes after that boundary, with no decode step between."""
    from planner.sim import schedulers

    eng = sglang_engine([64] * 4 + [20_000], [2000] * 4 + [4], [0.0] * 4 + [1.0])
    times = np.unique(np.asarray(eng.trace[0]))  # a step that admits records its start twice (Engine.record)
    boundary = times[np.searchsorted(times, 1.0)]
    chunks = [(4, 8192, 0), (4, 8192, 8192), (4, 3616, 16_384)]
    passes = sum(eng.table.pass_s(*schedulers.prefill_shape([chunk])) for chunk in chunks)
    assert eng.first[4] == pytest.approx(boundary + passes, rel=1e-9)
    assert len(times[(times >= boundary) & (times < eng.first[4])]) == 3  # three prefill steps, no decode


def test_mla_pool_hand_worked_deepseek_r1_dp_attention() -> None:
    """DeepSeek-R1 W4A8 as SGLang's `--tp-size 16 --dp-size 16 --enable-dp-attention` (kvplan tp 1 dp 16
    ep 16) on 910C dies. Default f: graph bs 256 (tp-size 16),
    r = 512 + 12 288 + 512 + 16 / 8 * 1024 + 3 * 256 * 16 = 27 648 MiB,
    f = round((62 420 - 27 648) / 62 420, 3) = 0.557, too little for the weights (the best-practice command
    sets 0.74). At 0.74: rest = floor(64 807 868 826 * 0.74) - W = 47 957 822 931 - 39 654 925 056
    = 8 302 897 875 B; MLA cell (get_cell_size_per_token) = (512 + 64) * 61 layers * 2 B = 70 272 B,
    replicated on every rank; N = 118 154 tokens, 118 144 in pages; 4096-token sequences: 28 per DP rank,
    448 in all."""
    request = {"model": "deepseek-r1", "card": "ascend-910c", "dtype": "w4a8", "engine": "sglang"}
    layout = {"tp": 1, "dp": 16, "ep": 16, "ctx": "4096"}
    assert inputs.to_deployment(PlanRequest(**request, **layout)).memory_fraction == 0.557
    dep = inputs.to_deployment(PlanRequest(**request, **layout, memory_fraction=0.74))
    mem, rec = capacity.memory_plan(dep)
    assert mem.weights_bytes == 39_654_925_056
    assert (mem.kv_budget_bytes, mem.kv_bytes_per_token) == (8_302_897_875, 70_272)
    assert room.pool_tokens(dep, mem) == 118_144
    assert rec.max_batch_size == 28 * 16


@pytest.mark.parametrize(
    ("flags", "model_path"),
    [
        (["-m", "qwen3-8b", "--card", "ascend-910b3"], "Qwen/Qwen3-8B"),  # 16-bit: the card's own repo
        (
            ["-m", "qwen3-32b", "--card", "ascend-910b3", "--tp", "4", "--dtype", "int8"],
            "vllm-ascend/Qwen3-32B-W8A8",
        ),
        (["-m", "qwen3-8b", "--card", "ascend-910b3", "--dtype", "int8", "--weights-path", "/w/q8"], "/w/q8"),
    ],
)
def test_sglang_model_path_holds_the_plans_weights(flags: list[str], model_path: str) -> None:
    result = runner.invoke(app, ["sglang", *flags])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].endswith(f"--model-path {model_path} \\")


def test_sglang_refuses_to_name_a_repo_whose_weights_are_not_the_plans() -> None:
    """A w4a16 plan of a model whose repo holds 16-bit weights printed that repo (SGLang would load bf16
    weights the plan did not size); now --weights-path is asked for in one line, as `kvplan vllm` does."""
    refused = runner.invoke(
        app, ["sglang", "-m", "qwen3-235b-a22b", "--card", "ascend-910b3", "--tp", "8", "--dtype", "w4a16"]
    )
    assert refused.exit_code == 2
    assert refused.output.startswith("kvplan: error: --weights-path: kvplan knows no w4a16 checkpoint")
