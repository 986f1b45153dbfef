"""planner.engines.mindie.log: parse MindIE start-up logs, compare with the prediction, correct the reserve.

The excerpts below are constructed (no Ascend device was available) from the lines MindIE-LLM master prints:
router initialize() (kvCacheDescs with npuBlockNum, one per rank), the C++ llm manager's
"CpuBlockNum:..; NpuBlockNum: ..", Generator's "Model loading took", warm_up's "Requested memory" and
MemoryProfilingResult, _validate_warmup_memory's "Allocated ... (GiB)" or its failure message, and
_get_warm_up_params. The prefixes imitate MindIE's "[time] [pid] [level] [module]" style; the parser
ignores them.

The plan they are checked against: qwen3-32b on ascend-910b3 (64 GiB), bf16, tp=4, ctx 8k, fraction 0.8:
weights 15.26 + activation 0.45 + runtime 3.00 = 18.71 GiB non-KV, KV budget 32.49 GiB, 64 x 512 MiB.
The "real" run below used 2 GiB more outside the KV cache: non-KV 20.71 GiB, so KV = 64 x 0.8 - 20.71
= 30.49 GiB = 3902 blocks of 8 MiB (128 tokens x 64 KiB), npuBlockNum 3902 - 1 = 3901 logged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import inputs, units
from planner.cli import app
from planner.engines import common
from planner.engines.mindie import config as mindie
from planner.engines.mindie import log as mindie_log
from planner.errors import PlanInputError
from planner.plan import compose as perf_plan
from tests.helpers import MINDIE_32B_TP4_ARGS

PREFIX = "[2026-05-02 10:11:12.345+08:00] [4711] [INFO] [llm] "
AUTO_RUN_LOG = (
    "\n".join(
        PREFIX + line
        for line in [
            "Model loading took 15.26 GiB memory.",
            "warmup params: max_prefill_tokens=8192, max_seq_len=8192, "
            "max_input_len=6144, max_iter_times=2048",
            "Requested memory: 0.8 (util), 51.20 GiB",
            "Total npu memory: 64.00 GiB; Total non KV cache memory: "
            "20.71 GiB; torch peak memory increase: 0.52 GiB; "
            "non-torch forward increase memory: 4.93 GiB.",
            "Allocated 30.49 (GiB) NPU memory for KVcache. Model role: standard",
            ">>>global rank:0: return initialize success result: {'status': 'ok', 'cpuBlockNum': '0', "
            "'maxPositionEmbeddings': '40960', 'kvCacheDescs': [{'npuBlockNum': 3901, 'blockSize': 128, "
            "'compressionRatio': 1, 'cacheType': 0}], 'memPoolId': '-1'}",
            ">>>global rank:1: return initialize success result: {'status': 'ok', 'cpuBlockNum': '0', "
            "'maxPositionEmbeddings': '40960', 'kvCacheDescs': [{'npuBlockNum': 3903, 'blockSize': 128, "
            "'compressionRatio': 1, 'cacheType': 0}], 'memPoolId': '-1'}",
            "CpuBlockNum:0; NpuBlockNum: 3901",
            "Since last schedule, pass 5 seconds, AsyncBatchNum=0, freeNpuBlockNum=3850, freeCpuBlockNum=0",
        ]
    )
    + "\n"
)
FAILED_WARMUP_LOG = PREFIX + (
    "Warmup failed. This could be caused by setting both `max_prefill_tokens` and "
    "`max_input_length` to very large values ... Required block number: 257. "
    "Left block number: 100.\n"
)


@pytest.fixture(scope="module")
def plan_and_prediction() -> tuple[object, mindie.BlockPrediction]:
    options = mindie.MindieOptions()
    dep = inputs.to_deployment(
        # the synthetic log's card reports 64.00 GiB in total: a custom size (a 910B3 reports 60.96 GiB)
        inputs.PlanRequest(
            model="qwen3-32b", card="ascend-910b3", dtype="bf16", tp=4, ctx="8k", memory_gib=64
        )
    )
    lengths = common.resolve_lengths(dep.ctx_tokens, block_size_tokens=128, options=options)
    plan = perf_plan.build_plan(dep, with_performance=False)
    return plan, mindie.predict_blocks(plan, lengths=lengths, npu_mem_gib=-1)


def test_parse_auto_run() -> None:
    figures = mindie_log.parse_mindie_log(AUTO_RUN_LOG)
    assert figures.npu_block_nums == [
        3901,
        3903,
        3901,
    ]  # two ranks + the C++ summary; freeNpuBlockNum ignored
    assert figures.npu_block_num == 3901  # the smallest over ranks (MindIE tuning guide)
    assert figures.block_size_tokens == 128
    assert figures.kv_cache_bytes == [units.gib_to_bytes(30.49)]
    assert figures.weights_bytes == [units.gib_to_bytes(15.26)]
    assert figures.total_memory_bytes == 64 * 2**30
    assert figures.non_kv_cache_bytes == [units.gib_to_bytes(20.71)]
    assert figures.memory_fraction == 0.8
    assert figures.warmup is not None and figures.warmup.max_seq_len == 8192
    assert figures.warmup_required_blocks is None


@pytest.mark.parametrize(
    ("line", "blocks"),
    [
        ("status: ok, npuBlockNum:817,cpuBlockNum:0", [817]),
        ('{"status": "ok", "npuBlockNum": "817", "cpuBlockNum": "5"}', [817]),
        ("npuBlockNum=42", [42]),
        ("status: error, npuBlockNum:0,cpubloknum:0", [0]),
        ("freeNpuBlockNum=3, totalNpuBlockNums=9, npu_block_num 5", []),
    ],
)
def test_npu_block_num_spellings(line: str, blocks: list[int]) -> None:
    assert mindie_log.parse_mindie_log(PREFIX + line).npu_block_nums == blocks


@pytest.mark.parametrize("logged", ["1.5", "0", "0.0"])
def test_memory_fraction_outside_what_mindie_accepts_is_refused(logged: str) -> None:
    log = AUTO_RUN_LOG.replace("Requested memory: 0.8 (util)", f"Requested memory: {logged} (util)")
    with pytest.raises(PlanInputError, match=rf"NPU_MEMORY_FRACTION out of range \(got '{logged}'"):
        mindie_log.parse_mindie_log(log)


# Older MindIE-LLM releases (generator.py warm-up and watch_npu_mem @40fb063; the wording of a public 300I Duo
# log, GPUStack issue 2849) log the same figures in GiB: a constructed excerpt with its own numbers. The
# serving-time "After forward, peak mem" line holds the KV cache too and must not count as non-KV memory.
OLD_RELEASE_LOG = "\n".join(
    PREFIX + line
    for line in [
        "After Decode warmup, peak mem: 16.50G, total_mem: 43.24G",
        "After check warmup, peak mem: 16.50G, total_mem: 43.24G",
        "`Total blocks` needs npu memory(GB): 18.09375",
        ">>>global rank:0: return initialize success result: {'status': 'ok', 'npuBlockNum': '2645', "
        "'cpuBlockNum': '0', 'maxPositionEmbeddings': '131072'}",
        "After forward, peak mem: 40.10G, total_mem: 43.24G",
    ]
)


def test_parse_old_release_wording() -> None:
    figures = mindie_log.parse_mindie_log(OLD_RELEASE_LOG)
    assert figures.non_kv_cache_bytes == [units.gib_to_bytes(16.50)] * 2
    assert figures.total_memory_bytes == units.gib_to_bytes(43.24)
    assert figures.kv_cache_bytes == [units.gib_to_bytes(18.09375)]
    assert figures.npu_block_num == 2645


def test_parse_failed_warmup() -> None:
    figures = mindie_log.parse_mindie_log(FAILED_WARMUP_LOG)
    assert (figures.warmup_required_blocks, figures.warmup_left_blocks) == (257, 100)
    assert figures.npu_block_num is None


def test_correction_from_profiling_reproduces_mindie_budget(plan_and_prediction) -> None:
    plan, prediction = plan_and_prediction
    figures = mindie_log.parse_mindie_log(AUTO_RUN_LOG)
    comparison = mindie_log.compare_with_log(plan, figures=figures, prediction=prediction)
    mem = plan.memory
    planned_non_kv = mem.weights_bytes + mem.activation_bytes + mem.runtime_bytes
    assert comparison.source == "Allocated ... NPU memory for KVcache"
    assert comparison.real_kv_budget_bytes == units.gib_to_bytes(30.49)
    assert comparison.reserve_delta_bytes == units.gib_to_bytes(20.71) - planned_non_kv
    # 2 GiB above the old 3 GiB reserve, i.e. 4.4 GiB above the 910B3's 0.6 GiB (hwprofiles/ascend-910b3.yaml)
    assert comparison.reserve_delta_bytes == pytest.approx((2 + 3.0 - 0.6) * 2**30, abs=0.01 * 2**30)
    assert comparison.corrected_runtime_bytes == mem.runtime_bytes + comparison.reserve_delta_bytes
    assert comparison.corrected_capacity_bytes == 64 * 2**30
    assert (comparison.predicted_npu_block_num, comparison.real_npu_block_num) == (
        prediction.npu_block_num,
        3901,
    )
    # The corrected plan's budget is MindIE's: floor(64 GiB x 0.8) - 20.71 GiB (GiB floats: allow 1 KiB)
    fixed = mindie_log.corrected_deployment(plan_dep(), comparison)
    corrected = perf_plan.build_plan(fixed, with_performance=False)
    expected = int(64 * 2**30 * 0.8) - units.gib_to_bytes(20.71)
    assert corrected.memory.kv_budget_bytes == pytest.approx(expected, abs=1024)
    assert corrected.recommendation.max_batch_size == expected // (512 * 2**20) == 60


def plan_dep():
    return inputs.to_deployment(
        inputs.PlanRequest(
            model="qwen3-32b", card="ascend-910b3", dtype="bf16", tp=4, ctx="8k", memory_gib=64
        )
    )


def test_correction_from_block_count_only(plan_and_prediction) -> None:
    plan, prediction = plan_and_prediction
    figures = mindie_log.parse_mindie_log(PREFIX + "CpuBlockNum:0; NpuBlockNum: 3901")
    comparison = mindie_log.compare_with_log(plan, figures=figures, prediction=prediction)
    real = (3901 + 1) * 8 * 2**20  # (npuBlockNum + the reserved block) x 128 tokens x 64 KiB
    assert (comparison.source, comparison.real_kv_budget_bytes) == ("npuBlockNum", real)
    assert comparison.reserve_delta_bytes == plan.memory.kv_budget_bytes - real
    assert comparison.corrected_capacity_bytes is None
    assert any("assuming the logged run used npuMemSize -1" in note for note in comparison.notes)


def test_correction_from_failed_warmup(plan_and_prediction) -> None:
    plan, prediction = plan_and_prediction
    figures = mindie_log.parse_mindie_log(FAILED_WARMUP_LOG)
    comparison = mindie_log.compare_with_log(plan, figures=figures, prediction=prediction)
    assert comparison.real_kv_budget_bytes == 100 * 8 * 2**20
    assert any("warm-up failed: it needed 257 blocks and had 100" in note for note in comparison.notes)


def test_reserve_never_negative(plan_and_prediction) -> None:
    plan, prediction = plan_and_prediction
    figures = mindie_log.parse_mindie_log(PREFIX + "Allocated 63.5 (GiB) NPU memory for KVcache.")
    comparison = mindie_log.compare_with_log(plan, figures=figures, prediction=prediction)
    assert comparison.corrected_runtime_bytes == 0
    assert any("reserve set to 0" in note for note in comparison.notes)


def test_consistency_notes(plan_and_prediction) -> None:
    plan, prediction = plan_and_prediction
    text = AUTO_RUN_LOG.replace("'blockSize': 128", "'blockSize': 64").replace("0.8 (util)", "0.9 (util)")
    text = text.replace("max_seq_len=8192", "max_seq_len=32768")
    notes = mindie_log.compare_with_log(
        plan, figures=mindie_log.parse_mindie_log(text), prediction=prediction
    ).notes
    assert any("blockSize is 64, this plan uses 128" in n for n in notes)
    assert any("NPU_MEMORY_FRACTION 0.9" in n for n in notes)
    assert any("max_seq_len 32768" in n for n in notes)


def test_log_without_figures_is_refused(plan_and_prediction) -> None:
    plan, prediction = plan_and_prediction
    with pytest.raises(
        PlanInputError,
        match=r"^--from-log: no KV figures in the log \(got no npuBlockNum, "
        r"'Allocated \.\.\. for KVcache' or 'Left block number' line, expected "
        r"at least one\); start MindIE with MINDIE_LLM_PYTHON_LOG_TO_FILE=1",
    ):
        mindie_log.compare_with_log(
            plan, figures=mindie_log.parse_mindie_log("nothing here\n"), prediction=prediction
        )


def test_cli_from_log_corrects_the_next_config(tmp_path: Path) -> None:
    log = tmp_path / "mindie.log"
    log.write_text(AUTO_RUN_LOG)
    args = [
        *MINDIE_32B_TP4_ARGS,
        "--weights-path",
        "/w",
        "--json",
    ]
    before = json.loads(CliRunner().invoke(app, args).output)
    result = CliRunner().invoke(app, [*args, "--from-log", str(log)])
    assert result.exit_code == 0, result.output
    after = json.loads(result.output)
    assert after["log"]["real_npu_block_num"] == 3901
    schedule = after["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]
    assert before["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]["maxBatchSize"] == 64
    assert schedule["maxBatchSize"] == 60  # 30.49 GiB // 512 MiB per 8k sequence
    text = CliRunner().invoke(app, [*args[:-1], "--from-log", str(log)]).output
    assert "MindIE log vs plan: npuBlockNum predicted" in text
    assert "logged 3901" in text
