"""`kvplan mindie`: goldens, MindIE's ranges and inter-field rules, merge into a user's config, CLI writes.

Goldens (tests/golden/mindie/<case>.json) are whole config.json files compared structurally; they are
regenerated only by `KVPLAN_UPDATE_GOLDEN=1 pytest tests/test_mindie.py` and the diff is reviewed.
They are built without the roofline (with_performance=False) so that speed-model changes do not move them:
prefillTimeMsPerReq / decodeTimeMsPerReq then keep MindIE's defaults 150 / 50 and supportSelectBatch false.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from planner import atomic, inputs, units
from planner.cli import app
from planner.engines import common
from planner.engines.mindie import config as mindie
from planner.engines.mindie import plugins as mindie_plugins
from planner.engines.mindie import rules as mindie_rules
from planner.engines.mindie.config import MindieOptions
from planner.errors import DataFileError, DoesNotFitError, PlanInputError
from planner.plan import compose as perf_plan
from planner.results import Performance
from tests.helpers import MINDIE_32B_TP4_ARGS, replacing

GOLDEN = Path(__file__).parent / "golden" / "mindie"
runner = CliRunner()
MISSION = [
    "mindie",
    "--model",
    "qwen3-27b",
    "--card",
    "ascend-950pr",
    "--ctx",
    "32k",
    "--dtype",
    "fp8",
    "--tp",
    "2",
    "--devices",
    "0,1",
    "--weights-path",
    "/data/models/qwen3-27b",
]


def plan_for(request: inputs.PlanRequest, options: MindieOptions) -> tuple[Any, common.Lengths]:
    """What cli_mindie.prepare + build_plan do, without the roofline."""
    dep = inputs.to_deployment(request)
    lengths = common.resolve_lengths(dep.ctx_tokens, block_size_tokens=dep.block_size_tokens, options=options)
    dep = dep.model_copy(update={"max_prefill_tokens": lengths.max_prefill_tokens})
    return perf_plan.build_plan(dep, with_performance=False), lengths


def build(request: inputs.PlanRequest, options: MindieOptions, base: dict[str, Any] | None = None) -> Any:
    plan, lengths = plan_for(request, options)
    base = base if base is not None else mindie_rules.load_base(options.mindie_version)
    return mindie.mindie_config(plan, base=base, lengths=lengths, options=options)


CASES: dict[str, tuple[inputs.PlanRequest, MindieOptions]] = {
    # The example: multimodal Qwen3.5 checkpoint, so npuMemSize is explicit.
    "qwen3-27b_950pr_fp8_tp2_32k": (
        inputs.PlanRequest(model="qwen3-27b", card="ascend-950pr", dtype="fp8", tp=2, ctx="32k"),
        MindieOptions(devices=[0, 1], weights_path="/data/models/qwen3-27b", model_name="qwen3-27b"),
    ),
    "qwen3-32b_910b3_bf16_tp4_8k": (
        inputs.PlanRequest(model="qwen3-32b", card="ascend-910b3", dtype="bf16", tp=4, ctx="8k"),
        MindieOptions(devices=[4, 5, 6, 7], weights_path="/data/models/Qwen3-32B", model_name="qwen3-32b"),
    ),
    # MindIE documents C8 (int8 KV) for W8A8 LLaMA3.1-70B on Atlas 800I A2 (kv_cache_int8.md:7-12).
    "llama-3.1-70b_910b2_int8_kvint8_tp4_4k": (
        inputs.PlanRequest(
            model="llama-3.1-70b", card="ascend-910b2", dtype="int8", kv_dtype="int8", tp=4, ctx="4k"
        ),
        MindieOptions(
            weights_path="/data/models/Llama-3.1-70B-w8a8c8",
            model_name="llama-3.1-70b",
            prefix_cache=True,
            max_output_tokens=512,
        ),
    ),
    "deepseek-v3_910c_int8_tp16_16k_mtp": (
        inputs.PlanRequest(model="deepseek-v3", card="ascend-910c", dtype="int8", tp=16, ctx="16k", mtp=1),
        MindieOptions(
            weights_path="/data/models/DeepSeek-V3-w8a8", model_name="deepseek-v3", mtp=1, prefix_cache=True
        ),
    ),
    "qwen3-14b_910b1_bf16_tp2_16k_rc3": (
        inputs.PlanRequest(model="qwen3-14b", card="ascend-910b1", dtype="bf16", tp=2, ctx="16k"),
        MindieOptions(
            weights_path="/data/models/Qwen3-14B", model_name="qwen3-14b", mindie_version="1.0.RC3"
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str) -> None:
    result = build(*CASES[case])
    produced = json.loads(mindie_rules.render_config(result.config))
    path = GOLDEN / f"{case}.json"
    if os.environ.get("KVPLAN_UPDATE_GOLDEN") == "1":
        path.write_text(mindie_rules.render_config(result.config), encoding="utf-8")
    assert produced == json.loads(path.read_text(encoding="utf-8"))


def test_mission_prediction_follows_mindie_formula() -> None:
    plan, lengths = plan_for(*CASES["qwen3-27b_950pr_fp8_tp2_32k"])
    result = build(*CASES["qwen3-27b_950pr_fp8_tp2_32k"])
    p = result.prediction
    # KV bytes per token per rank: 2 (K, V) x 16 full-attention layers x 2 KV heads (4 / tp 2) x 256 x 2 B
    assert plan.memory.kv_bytes_per_token == 32_768
    assert p.block_bytes == 128 * 32_768 == 4_194_304  # cacheBlockSize x bytes per token
    # explicit npuMemSize: the KV budget minus the GDN states of maxBatchSize sequences, whole GiB
    states = plan.recommendation.max_batch_size * plan.memory.state_bytes_per_sequence
    gib = (plan.memory.kv_budget_bytes - states) // units.GIB_BYTES
    assert result.config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["npuMemSize"] == gib
    assert p.allocated_blocks == gib * 2**30 // 4_194_304  # floor(npuMemSize GiB / block bytes)
    assert p.npu_block_num == p.allocated_blocks - 1  # the router keeps the last block for dummy batches
    # 32k = 24576 in + 8192 out: ceil(24576/128) + ceil(8192/128) = 192 + 64
    assert (lengths.max_input_tokens, lengths.max_output_tokens) == (24_576, 8_192)
    assert p.blocks_per_request == 256
    assert p.concurrency == p.npu_block_num // 256
    assert result.npu_mem_mode == "explicit" and result.env == {}


def test_tls_switched_on_in_the_base_gets_one_note() -> None:
    """The shipped template keeps MindIE's TLS switches on (kvplan copies them unchanged): one note names
    them and what a local test without certificates needs; a base with them off gets no such note."""
    import copy

    request, options = CASES["qwen3-27b_950pr_fp8_tp2_32k"]
    base = mindie_rules.load_base(options.mindie_version)
    notes = [n for n in build(request, options, base).notes if n.startswith("TLS: ")]
    assert len(notes) == 1 and "ServerConfig.httpsEnabled" in notes[0] and "set them false" in notes[0]
    off = copy.deepcopy(base)
    for path in mindie.TLS_FIELDS:
        off[path[0]][path[1]] = False
    assert not [n for n in build(request, options, off).notes if n.startswith("TLS: ")]


def test_fields_taken_from_the_plan() -> None:
    plan, _ = plan_for(*CASES["qwen3-32b_910b3_bf16_tp4_8k"])
    cfg = build(*CASES["qwen3-32b_910b3_bf16_tp4_8k"]).config
    deploy, schedule = cfg["BackendConfig"]["ModelDeployConfig"], cfg["BackendConfig"]["ScheduleConfig"]
    model = deploy["ModelConfig"][0]
    assert schedule["maxBatchSize"] == plan.recommendation.max_batch_size
    assert (deploy["maxSeqLen"], deploy["maxInputTokenLen"], schedule["maxIterTimes"]) == (8192, 6144, 2048)
    assert schedule["maxPrefillTokens"] == 8192  # max(8192 default, maxInputTokenLen 6144)
    assert (model["worldSize"], cfg["BackendConfig"]["npuDeviceIds"]) == (4, [[4, 5, 6, 7]])
    assert (model["npuMemSize"], model["cpuMemSize"], schedule["maxPreemptCount"]) == (-1, 0, 0)
    assert "plugin_params" not in model


def test_auto_mode_exports_the_plan_fraction() -> None:
    result = build(*CASES["qwen3-32b_910b3_bf16_tp4_8k"])
    assert result.npu_mem_mode == "auto"
    assert result.env == {"NPU_MEMORY_FRACTION": "0.8"}


def test_plugin_params_for_mtp_and_prefix_cache() -> None:
    cfg = build(*CASES["deepseek-v3_910c_int8_tp16_16k_mtp"]).config
    params = json.loads(cfg["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["plugin_params"])
    assert params == {"plugin_type": "mtp,prefix_cache", "num_speculative_tokens": 1}


def test_mtp_adds_one_cached_layer() -> None:
    request, options = CASES["deepseek-v3_910c_int8_tp16_16k_mtp"]
    with_mtp, _ = plan_for(request, options)
    without, _ = plan_for(
        inputs.PlanRequest(model="deepseek-v3", card="ascend-910c", dtype="int8", tp=16, ctx="16k"),
        options.model_copy(update={"mtp": 0}),
    )
    # MLA latent (512 + 64) x 2 B per layer: 61 layers, 62 with MTP
    assert (without.memory.kv_bytes_per_token, with_mtp.memory.kv_bytes_per_token) == (61 * 1152, 62 * 1152)


def test_roofline_times_set_select_batch() -> None:
    plan, lengths = plan_for(*CASES["qwen3-32b_910b3_bf16_tp4_8k"])
    perf = Performance(
        batch=1,
        ctx_tokens=8192,
        decode_step_s=0.0421,
        tokens_per_step=1.0,
        tpot_s=0.0421,
        ttft_s=2.5,
        calibrated=False,
    )
    timed = plan.model_copy(update={"performance": perf})
    result = mindie.mindie_config(
        timed,
        base=mindie_rules.load_base("2.x"),
        lengths=lengths,
        options=CASES["qwen3-32b_910b3_bf16_tp4_8k"][1],
    )
    schedule = result.config["BackendConfig"]["ScheduleConfig"]
    # 2.5 s TTFT clamps to MindIE's 1000 ms maximum; 42.1 ms decode step rounds to 42
    assert (schedule["prefillTimeMsPerReq"], schedule["decodeTimeMsPerReq"]) == (1000, 42)
    # uncalibrated times are written but not used: supportSelectBatch stays false, with a note
    assert schedule["supportSelectBatch"] is False
    assert any("clamped" in note for note in result.notes)
    assert any("supportSelectBatch false" in note for note in result.notes)
    options = CASES["qwen3-32b_910b3_bf16_tp4_8k"][1]

    def written(ttft_s: float) -> tuple[bool, list[str]]:
        calibrated = perf.model_copy(update={"calibrated": True, "ttft_s": ttft_s})
        result = mindie.mindie_config(
            timed.model_copy(update={"performance": calibrated}),
            base=mindie_rules.load_base("2.x"),
            lengths=lengths,
            options=options,
        )
        return result.config["BackendConfig"]["ScheduleConfig"]["supportSelectBatch"], result.notes

    # calibrated but clamped (2.5 s > 1000 ms): the written time misstates the weight, so still false
    chosen, notes = written(2.5)
    assert chosen is False and any("supportSelectBatch stays false" in note for note in notes)
    # calibrated and within 1000 ms: true, and a note on reproducing it in serve / simulate
    chosen, notes = written(0.5)
    assert chosen is True and not any("supportSelectBatch false" in note for note in notes)
    assert any("--select-batch --prefill-time-ms-per-req 500 --decode-time-ms-per-req 42" in n for n in notes)


# --- lengths --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ctx", "given", "expected"),
    [
        (32768, {}, (24576, 8192, 24576)),  # output ctx/4 in whole blocks; prefill raised to the input
        (4096, {"max_output_tokens": 512}, (3584, 512, 8192)),
        (4096, {"max_input_tokens": 1000}, (1000, 3096, 8192)),
        (2560, {"max_input_tokens": 2048, "max_output_tokens": 512}, (2048, 512, 8192)),
        (100, {}, (75, 25, 8192)),  # shorter than 4 blocks: plain quarter
    ],
)
def test_resolve_lengths(ctx: int, given: dict[str, int], expected: tuple[int, int, int]) -> None:
    lengths = common.resolve_lengths(ctx, block_size_tokens=128, options=MindieOptions(**given))
    assert (lengths.max_input_tokens, lengths.max_output_tokens, lengths.max_prefill_tokens) == expected


def test_lengths_must_fit_ctx() -> None:
    with pytest.raises(
        PlanInputError,
        match=r"^--max-input-tokens/--max-output-tokens: input \+ output must fit "
        r"in --ctx with both >= 1 \(got 4000 \+ 512, expected a sum <= 4096\)$",
    ):
        common.resolve_lengths(
            4096, block_size_tokens=128, options=MindieOptions(max_input_tokens=4000, max_output_tokens=512)
        )


# --- MindIE's ranges and inter-field rules ---------------------------------------------------------------


def valid_config() -> dict[str, Any]:
    return copy.deepcopy(build(*CASES["qwen3-32b_910b3_bf16_tp4_8k"]).config)


def mutate(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    cfg = valid_config()
    node: Any = cfg
    for part in path[:-1]:
        node = node[part]
    if value is mindie.MISSING:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return cfg


S, D, M = mindie_rules.SCHEDULE, mindie_rules.DEPLOY, mindie_rules.MODEL
VIOLATIONS = [
    (
        (*S, "maxPrefillTokens"),
        4096,
        "BackendConfig.ScheduleConfig.maxPrefillTokens: must be "
        ">= BackendConfig.ModelDeployConfig.maxInputTokenLen "
        "(got 4096, expected >= 6144); raise --max-prefill-tokens or lower --max-input-tokens",
    ),
    (
        (*S, "maxIterTimes"),
        9000,
        "BackendConfig.ScheduleConfig.maxIterTimes: must be <= BackendConfig.ModelDeployConfig.maxSeqLen "
        "(got 9000, expected <= 8192); lower --max-output-tokens",
    ),
    (
        (*S, "maxPreemptCount"),
        100,
        "BackendConfig.ScheduleConfig.maxBatchSize: must be >= BackendConfig.ScheduleConfig.maxPreemptCount "
        "(got 64, expected >= 100)",
    ),
    (
        (*S, "maxPreemptCount"),
        4,
        "BackendConfig.ModelDeployConfig.ModelConfig[0].cpuMemSize: must be > 0 when maxPreemptCount is 4 "
        "(preemption swaps KV to host memory) (got 0, expected > 0)",
    ),
    (
        (*M, "worldSize"),
        2,
        "BackendConfig.ModelDeployConfig.ModelConfig[0].worldSize: must equal the number of devices in "
        "BackendConfig.npuDeviceIds (got 2, expected 4); set --devices and --tp together",
    ),
    (
        (*M, "npuMemSize"),
        0,
        "BackendConfig.ModelDeployConfig.ModelConfig[0].npuMemSize: out of MindIE's range (got 0, "
        "expected -1 or [1, 2147483647])",
    ),
    (
        (*S, "cacheBlockSize"),
        256,
        "BackendConfig.ScheduleConfig.cacheBlockSize: out of MindIE's range (got 256, expected [1, 128]); "
        "set --block-size 128",
    ),
    (
        (*S, "cacheBlockSize"),
        100,
        "BackendConfig.ScheduleConfig.cacheBlockSize: must be a "
        "multiple of 16 (got 100, expected 16, 32, 64 or 128); "
        "set --block-size 128 (MindIE's advice)",
    ),
    (
        (*S, "maxBatchSize"),
        5001,
        "BackendConfig.ScheduleConfig.maxBatchSize: out of MindIE's "
        "range (got 5001, expected [1, 5000]); set --batch",
    ),
    (
        (*S, "maxQueueDelayMicroseconds"),
        100,
        "BackendConfig.ScheduleConfig.maxQueueDelayMicroseconds: out of MindIE's range (got 100, expected "
        "[500, 1000000])",
    ),
    (
        (*S, "decodeTimeMsPerReq"),
        1001,
        "BackendConfig.ScheduleConfig.decodeTimeMsPerReq: out "
        "of MindIE's range (got 1001, expected [0, 1000])",
    ),
    (
        (*S, "maxPrefillBatchSize"),
        65,
        "BackendConfig.ScheduleConfig.maxPrefillBatchSize: must "
        "be <= BackendConfig.ScheduleConfig.maxBatchSize "
        "(got 65, expected <= 64); 0 means maxBatchSize",
    ),
    (
        (*D, "maxInputTokenLen"),
        0,
        "BackendConfig.ModelDeployConfig.maxInputTokenLen: out "
        "of MindIE's range (got 0, expected [1, 4194304]); "
        "set --max-input-tokens",
    ),
    (
        ("BackendConfig", "modelInstanceNumber"),
        11,
        "BackendConfig.modelInstanceNumber: out of MindIE's range (got 11, expected [1, 10])",
    ),
    (
        (*M, "backendType"),
        "cuda",
        "BackendConfig.ModelDeployConfig.ModelConfig[0].backendType: "
        "unknown backend (got 'cuda', expected atb or ms)",
    ),
    (
        (*D, "truncation"),
        "no",
        "BackendConfig.ModelDeployConfig.truncation: must be a boolean (got 'no', expected true or false)",
    ),
    (
        (*S, "maxBatchSize"),
        64.0,
        "BackendConfig.ScheduleConfig.maxBatchSize: must be an integer (got 64.0, expected [1, 5000])",
    ),
    (
        (*D, "maxSeqLen"),
        mindie.MISSING,
        "BackendConfig.ModelDeployConfig.maxSeqLen: missing (got nothing, expected [1, 4294967295])",
    ),
    (
        ("BackendConfig", "npuDeviceIds"),
        [[0, 0, 1, 2]],
        "BackendConfig.npuDeviceIds: ids must be distinct integers "
        ">= 0 (got [0, 0, 1, 2], expected e.g. [0, 1])",
    ),
    (
        (*M, "plugin_params"),
        '{"plugin_type":"mtp","num_speculative_tokens":3}',
        "BackendConfig.ModelDeployConfig.ModelConfig[0].plugin_params: "
        "MTP num_speculative_tokens out of MindIE's "
        "range (got 3, expected 1 or 2); set --mtp 1",
    ),
    (
        (*M, "plugin_params"),
        "mtp",
        "BackendConfig.ModelDeployConfig.ModelConfig[0].plugin_params: must be a JSON object in a string "
        "(got 'mtp', expected '{\"plugin_type\":\"mtp\",...}')",
    ),
]


@pytest.mark.parametrize(
    ("path", "value", "message"), VIOLATIONS, ids=[f"{v[0][-1]}-{i}" for i, v in enumerate(VIOLATIONS)]
)
def test_rule_violations_have_exact_messages(path: tuple[str | int, ...], value: Any, message: str) -> None:
    with pytest.raises(PlanInputError) as info:
        mindie_rules.validate_config(mutate(path, value))
    assert str(info.value) == message


def test_mtp_excludes_splitfuse() -> None:
    cfg = mutate((*M, "plugin_params"), '{"plugin_type":"mtp","num_speculative_tokens":1}')
    cfg["BackendConfig"]["ScheduleConfig"]["templateType"] = "Mix"
    with pytest.raises(
        PlanInputError,
        match=r"^BackendConfig\.ScheduleConfig\.templateType: MTP cannot be combined "
        r"with SplitFuse \(got 'Mix', expected Standard\)$",
    ):
        mindie_rules.validate_config(cfg)


def test_preemption_with_cpu_memory_is_valid() -> None:
    cfg = mutate((*S, "maxPreemptCount"), 4)
    cfg["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["cpuMemSize"] = 5
    mindie_rules.validate_config(cfg)


def test_committed_bases_pass_validation_after_merge() -> None:
    for version in mindie_rules.MINDIE_BASE_FILES:
        base = mindie_rules.load_base(version)
        assert base["Version"] == "1.0.0"
        assert "BackendConfig" in base and "ScheduleConfig" in base["BackendConfig"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            MindieOptions(mtp=3),
            r"^--mtp: MindIE's MTP plugin takes 1 or 2 speculative tokens \(got 3, expected 1 or 2\)$",
        ),
        (
            MindieOptions(prefix_cache=True, mindie_version="1.0.RC3"),
            r"^--prefix-cache: kvplan writes plugin_params only for "
            r"the 2\.x layout \(got --mindie-version 1\.0\.RC3, "
            r"expected 2\.x\)",
        ),
        (
            MindieOptions(devices=[0, 1]),
            r"^--devices: worldSize must equal the number of distinct "
            r"NPU ids \(got 0,1, expected 4 distinct ids >= 0 "
            r"for --tp 4\)$",
        ),
        (MindieOptions(devices=[0, 0, 1, 2]), r"^--devices: worldSize must equal"),
        (MindieOptions(npu_mem_size="auto"), None),
    ],
)
def test_flag_constraints(options: MindieOptions, message: str | None) -> None:
    request = CASES["qwen3-32b_910b3_bf16_tp4_8k"][0]
    plan, lengths = plan_for(request, MindieOptions())
    options = options.model_copy(update={"weights_path": "/w"})
    if message is None:
        mindie.mindie_config(plan, base=mindie_rules.load_base("2.x"), lengths=lengths, options=options)
        return
    with pytest.raises(PlanInputError, match=message):
        mindie.mindie_config(plan, base=mindie_rules.load_base("2.x"), lengths=lengths, options=options)


def test_multimodal_refuses_auto() -> None:
    with pytest.raises(
        PlanInputError,
        match=r"^--npu-mem-size: MindIE does not allow npuMemSize -1 for multimodal "
        r"models \(got auto for qwen3\.5-27b, expected explicit\)$",
    ):
        mindie.npu_mem_mode("qwen3.5-27b", requested="auto")


def test_warmup_that_cannot_fit_is_refused() -> None:
    plan, lengths = plan_for(*CASES["qwen3-32b_910b3_bf16_tp4_8k"])
    prediction = mindie.predict_blocks(plan, lengths=lengths, npu_mem_gib=-1)
    tight = prediction.model_copy(update={"allocated_blocks": 10})  # 8k / 128 = 64 blocks needed
    with pytest.raises(
        DoesNotFitError,
        match=r"^qwen3-32b on ascend-910b3 at tp=4: MindIE's warm-up would fail "
        r"\(got 10 KV blocks, expected >= 64 for one maxSeqLen request\)",
    ):
        mindie.check_warmup(plan, tight)


# --- merge into a user's config -------------------------------------------------------------------------


def user_base() -> dict[str, Any]:
    base = mindie_rules.load_base("2.x")
    base["MyTeam"] = {"owner": "infra", "nested": [1, {"x": None}]}
    base["ServerConfig"]["ipAddress"] = "10.0.0.7"
    base["ServerConfig"]["customHeader"] = "X-Trace"
    base["BackendConfig"]["ScheduleConfig"]["futureKnob"] = 3.5
    base["BackendConfig"]["ScheduleConfig"]["templateType"] = "Standard"
    model = base["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    model["modelName"], model["modelWeightPath"] = "served-name", "/mnt/weights"
    model["plugin_params"] = '{"plugin_type":"la","level":4,"window":5,"guess_set_size":5}'
    model["trustRemoteCode"] = True
    base["BackendConfig"]["ModelDeployConfig"]["ModelConfig"].append({"modelName": "second", "worldSize": 9})
    return base


def without_owned(cfg: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(cfg)
    for field in mindie.OWNED_FIELDS:
        parent = mindie.lookup(out, field.path[:-1])
        parent.pop(field.key, None)
    return out


def test_merge_keeps_every_unknown_field_and_order() -> None:
    base = user_base()
    request, _ = CASES["qwen3-32b_910b3_bf16_tp4_8k"]
    result = build(request, MindieOptions(prefix_cache=True), base=base)
    merged = json.loads(mindie_rules.render_config(result.config))
    assert without_owned(merged) == without_owned(base)
    assert list(merged) == list(base)
    assert list(merged["BackendConfig"]["ScheduleConfig"]) == list(base["BackendConfig"]["ScheduleConfig"])
    model = merged["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert (model["modelName"], model["modelWeightPath"]) == (
        "served-name",
        "/mnt/weights",
    )  # kept (no flags)
    assert json.loads(model["plugin_params"]) == {
        "plugin_type": "la,prefix_cache",
        "level": 4,
        "window": 5,
        "guess_set_size": 5,
    }
    assert base == user_base()  # the input dict is not modified


def test_merge_refuses_mtp_with_lookahead() -> None:
    with pytest.raises(
        PlanInputError,
        match=r"^--mtp: MindIE's MTP cannot be combined with parallel decoding "
        r"\(got plugin_type la in the base, expected none of memory_decoding, "
        r"la\)$",
    ):
        mindie_plugins.merge_plugins(
            user_base()["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["plugin_params"],
            mtp=1,
            prefix_cache=False,
        )


def test_merge_drops_kvplan_plugins_when_not_asked() -> None:
    merged = mindie_plugins.merge_plugins(
        '{"plugin_type":"mtp,prefix_cache","num_speculative_tokens":1}', mtp=0, prefix_cache=False
    )
    assert merged.params is None
    assert [note.split(" plugin")[0] for note in merged.notes] == ["--base's mtp", "--base's prefix_cache"]


def test_merge_needs_the_mindie_layout() -> None:
    request, _ = CASES["qwen3-32b_910b3_bf16_tp4_8k"]
    with pytest.raises(
        DataFileError,
        match=r"^BackendConfig\.ModelDeployConfig: missing from the base config "
        r"\(got no such object, expected a MindIE config\.json of the 1\.0\.RC3\+ "
        r"layout\)$",
    ):
        build(request, MindieOptions(weights_path="/w", model_name="m"), base={"BackendConfig": {}})


def test_bad_base_json_names_the_file() -> None:
    with pytest.raises(DataFileError, match=r"^mine\.json: not valid JSON \(line 1 column 2: "):
        mindie_rules.parse_config_text("{,}", source="mine.json")
    with pytest.raises(DataFileError, match=r"^mine\.json: size out of MindIE's range \(got 0 bytes"):
        mindie_rules.parse_config_text("", source="mine.json")


# --- CLI: output, no-clobber, --base ---------------------------------------------------------------------


def test_cli_mission_writes_a_valid_config(tmp_path: Path) -> None:
    out = tmp_path / "config.json"
    result = runner.invoke(app, [*MISSION, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "Predicted npuBlockNum per card:" in result.output
    assert "Concurrency at 24576 in + 8192 out:" in result.output
    cfg = json.loads(out.read_text())
    mindie_rules.validate_config(cfg)
    deploy = cfg["BackendConfig"]["ModelDeployConfig"]
    assert (deploy["maxSeqLen"], deploy["ModelConfig"][0]["worldSize"]) == (32768, 2)
    assert deploy["ModelConfig"][0]["modelWeightPath"] == "/data/models/qwen3-27b"
    assert (out.stat().st_mode & 0o777) == atomic.new_file_mode()  # 0640 less the umask


def test_cli_json_output() -> None:
    result = runner.invoke(app, [*MISSION, "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert (
        payload["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]["maxBatchSize"]
        == (payload["plan"]["recommendation"]["max_batch_size"])
    )
    assert payload["mindie"]["prediction"]["blocks_per_request"] == 256


def test_cli_refuses_to_clobber_then_keeps_backups(tmp_path: Path) -> None:
    out = tmp_path / "config.json"
    out.write_text('{"mine": true}\n')
    refused = runner.invoke(app, [*MISSION, "-o", str(out)])
    assert refused.exit_code == 2
    assert (
        f"kvplan: error: -o/--out: {out}: already exists (got an existing file, expected a new path); "
        "pass --force" in (refused.output)
    )
    assert out.read_text() == '{"mine": true}\n'
    forced = runner.invoke(app, [*MISSION, "-o", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    assert (tmp_path / "config.json.bak").read_text() == '{"mine": true}\n'
    again = runner.invoke(app, [*MISSION, "-o", str(out), "--force"])
    assert again.exit_code == 0
    assert json.loads((tmp_path / "config.json.bak.1").read_text())["Version"] == "1.0.0"


def test_cli_base_in_place_needs_force(tmp_path: Path) -> None:
    base = tmp_path / "config.json"
    base.write_text(json.dumps(user_base(), indent=4))
    args = [
        *MINDIE_32B_TP4_ARGS,
        "--base",
        str(base),
        "-o",
        str(base),
    ]
    assert runner.invoke(app, args).exit_code == 2
    result = runner.invoke(app, [*args, "--force"])
    assert result.exit_code == 0, result.output
    merged = json.loads(base.read_text())
    assert merged["MyTeam"] == {"owner": "infra", "nested": [1, {"x": None}]}
    assert merged["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][1] == {
        "modelName": "second",
        "worldSize": 9,
    }
    assert json.loads((tmp_path / "config.json.bak").read_text()) == user_base()


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (
            ["--devices", "0,1,2"],
            2,
            "kvplan: error: --devices: worldSize must equal the number of distinct NPU ids",
        ),
        (
            ["--devices", "a,b"],
            2,
            "kvplan: error: --devices: not a comma-separated list of NPU ids (got 'a,b'",
        ),
        (["--npu-mem-size", "half"], 2, "kvplan: error: --npu-mem-size: unknown mode (got 'half'"),
        (["--npu-mem-size", "auto"], 2, "kvplan: error: --npu-mem-size: MindIE does not allow npuMemSize -1"),
        (["--mindie-version", "0.9"], 2, "kvplan: error: --mindie-version: unknown layout (got '0.9'"),
        (["--memory-gib", "16"], 3, "kvplan: error: qwen3.5-27b (fp8) does not fit on ascend-950pr at tp=2"),
    ],
)
def test_cli_errors(extra: list[str], code: int, message: str) -> None:
    result = runner.invoke(app, replacing(MISSION, extra))
    assert result.exit_code == code, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_cli_needs_weights_path_without_base() -> None:
    result = runner.invoke(app, ["mindie", "--model", "qwen3-8b"])
    assert result.exit_code == 2
    assert "kvplan: error: --weights-path: required to write a MindIE config" in result.output


@pytest.mark.parametrize("block", ["7", "256"])
def test_plan_refuses_a_block_size_mindie_refuses(block: str) -> None:
    """`kvplan --block-size 7` (engine mindie) printed a plan and `Next: kvplan mindie ... --block-size 7`,
    which then failed on cacheBlockSize (a multiple of 16, <= 128): the plan refuses it alike (exit 2),
    while vLLM, which takes any block size, still plans it."""
    from typer.testing import CliRunner

    from planner.cli import app

    runner = CliRunner()
    flags = ["--model", "qwen3-27b", "--ctx", "32k", "--dtype", "fp8", "--block-size", block]
    for command in ([], ["mindie", "--weights-path", "/w"]):
        result = runner.invoke(app, [*command, *flags])
        assert result.exit_code == 2 and "--block-size: MindIE's cacheBlockSize" in result.output
    assert runner.invoke(app, [*flags, "--engine", "vllm"]).exit_code == 0
    assert runner.invoke(app, [*flags[:-1], "48"]).exit_code == 0


def test_an_input_or_output_length_past_ctx_names_its_own_flag() -> None:
    """--max-input-tokens 5k in a 4k --ctx is refused as that flag, with no negative remainder in the line."""
    args = ["mindie", "--model", "qwen3-8b", "--weights-path", "/w", "--max-input-tokens", "5k"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert line.startswith("kvplan: error: --max-input-tokens: 5120 leaves no room in --ctx 4096")
    assert "-1024" not in line and len(line.splitlines()) == 1


def test_the_plan_refuses_a_ctx_whose_prompt_mindie_refuses() -> None:
    """A --ctx whose prompt budget (maxPrefillTokens, by default the input part of --ctx) passes MindIE's
    limit (4 194 304) is refused by the plan itself (exit 2), not recommended and then refused by `kvplan
    mindie`; an explicit budget within the limit is raised to maxInputTokenLen and so refused too (MindIE's
    maxPrefillTokens >= maxInputTokenLen), and vLLM takes the long context."""
    flags = ["--model", "qwen3-0.6b", "--ctx", "1024m", "--memory-gib", "1048576"]
    refused = runner.invoke(app, flags)
    assert refused.exit_code == 2 and "--ctx: MindIE takes prompts (maxInputTokenLen" in refused.stderr
    assert runner.invoke(app, [*flags, "--engine", "vllm"]).exit_code == 0
    raised = runner.invoke(app, [*flags, "--max-prefill-tokens", "1048576"])
    assert raised.exit_code == 2 and "--ctx: MindIE takes prompts (maxInputTokenLen" in raised.stderr


@pytest.mark.parametrize("given", ["1", "20000"])
def test_the_fields_table_never_misstates_the_prefill_flag(given: str) -> None:
    """The fields table's "from" for maxPrefillTokens names the flag without a value it may not have (it
    read "max(--max-prefill-tokens 8192, ...)" whatever was passed); the value is max(flag, input)."""
    args = ["mindie", "--model", "qwen3-27b", "--dtype", "fp8", "--weights-path", "/w"]
    result = runner.invoke(app, [*args, "--max-prefill-tokens", given, "--json"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output[-300:]
    payload = json.loads(result.stdout)
    config = payload["mindie"]["config"]
    written = config["BackendConfig"]["ScheduleConfig"]["maxPrefillTokens"]
    assert written == max(int(given), config["BackendConfig"]["ModelDeployConfig"]["maxInputTokenLen"])
    table = runner.invoke(app, [*args, "--max-prefill-tokens", given], env={"COLUMNS": "300"}).stderr
    row = next(line for line in table.splitlines() if "ScheduleConfig.maxPrefillTokens" in line)
    assert f"│ {written} " in row and "--max-prefill-tokens 8192" not in row
    assert "max(--max-prefill-tokens (default 8192), maxInputTokenLen)" in row
