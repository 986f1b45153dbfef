"""P:D fleets whose sides have their own tp, dp and ep (issue 23: vllm-ascend's disaggregated configs run
prefill tp 8 dp 2 against decode tp 4 dp 4), the flags that set them, and one published row's command
checked by hand against its config file."""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import inputs
from planner.cli import app
from planner.deployment import Deployment
from planner.sim import pdloop, pdspec
from planner.sim import workload as wl

runner = CliRunner()
CORPUS = Path(__file__).resolve().parents[1] / "lab" / "published" / "ascend-serving.csv"
MOE = ["simulate", "-m", "qwen3-30b-a3b", "--card", "ascend-910c", "--dtype", "int8", "--requests", "20"]


def dense(**kw: object) -> Deployment:
    fields: dict[str, object] = {"dtype": "int8", "tp": 1, "ctx": "2048", "engine": "vllm", **kw}
    return inputs.to_deployment(inputs.PlanRequest(model="qwen3-8b", card="ascend-910c", **fields))  # type: ignore[arg-type]


def closed_loop(users: int, count: int) -> wl.Workload:
    lengths = (wl.LengthDist("fixed", 1024, 1024), wl.LengthDist("fixed", 128, 128))
    work = wl.synthetic(lengths=lengths, count=count, rate_per_s=None, seed=3)
    return wl.Workload(work.input_tokens, work.output_tokens, arrival_s=None, concurrency=users)


def test_an_instances_dp_groups_are_engines_of_the_fleet() -> None:
    """A dense model's DP groups are independent replicas of one rank (vLLM runs non-MoE DP ranks so), each
    with the rank's pool and step: 1 prefill : 1 decode instance of dp 2 is exactly 2 : 2 instances of dp 1
    (same round robin over the same engines, the batch cap given per group)."""
    work = closed_loop(users=12, count=48)
    knobs: dict[str, object] = {"max_batch": 4, "max_batched_tokens": 4096}
    grouped = pdspec.spec_for(dense(dp=2), counts=(1, 1))
    assert (grouped.prefill_groups, grouped.decode_groups, grouped.devices) == (2, 2, 4)
    split = pdspec.spec_for(dense(), counts=(2, 2))
    one = pdloop.simulate_fleet(grouped, work, slo=(None, None), knobs=knobs).records
    two = pdloop.simulate_fleet(split, work, slo=(None, None), knobs=knobs).records
    assert one.finish_s == pytest.approx(two.finish_s, rel=1e-12)
    assert one.first_token_s == pytest.approx(two.first_token_s, rel=1e-12)


def test_prefill_side_takes_its_own_layout() -> None:
    """--prefill-tp/-dp/-ep set the prefill deployment; the decode keeps --tp/--dp/--ep; devices count every
    DP group: 1 x (4 x 2) + 1 x (2 x 4) = 16."""
    moe = inputs.to_deployment(
        inputs.PlanRequest(
            model="qwen3-30b-a3b", card="ascend-910c", dtype="int8", tp=2, dp=4, ep=8, ctx="4096"
        )
    )
    spec = pdspec.spec_for(moe, counts=(1, 1), prefill=pdspec.PrefillLayout(tp=4, dp=2, ep=8))
    assert (spec.prefill.tp, spec.prefill.dp, spec.prefill.ep) == (4, 2, 8)
    assert (spec.decode.tp, spec.decode.dp, spec.decode.ep) == (2, 4, 8)
    assert spec.devices == 16 and (spec.prefill_groups, spec.decode_groups) == (2, 4)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--tp", "2", "--dp", "2", "--ep", "4", "--pd", "1:1", "--prefill-dp", "1"], "--prefill-ep: "),
        (["--pd", "1:1", "--prefill-dp", "0"], "--prefill-dp: out of range (got 0, expected 1..64)"),
        (["--prefill-ep", "2"], "--prefill-ep: only used with --pd"),
    ],
)
def test_prefill_layout_refusals_are_one_line(extra: list[str], needle: str) -> None:
    out = runner.invoke(app, [*MOE, "--rate", "2", *extra])
    assert out.exit_code == 2, out.output
    assert out.output.startswith("kvplan: error: " + needle) and out.output.count("\n") == 1


def test_cli_runs_dp_on_both_sides_and_names_the_prefill_layout() -> None:
    args = [*MOE, "--concurrency", "8", "--tp", "2", "--dp", "2", "--ep", "4", "--pd", "1:1"]
    out = runner.invoke(app, [*args, "--prefill-tp", "4", "--prefill-dp", "1", "--prefill-ep", "4"])
    assert out.exit_code == 0, out.output
    assert "tp=2 dp=2 ep=4, P:D 1:1 (prefill tp=4 ep=4)" in out.output
    payload = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert payload["requests"] == 20 and payload["max_batch_reached"] >= 1


def corpus_row(line: int) -> dict[str, str]:
    with CORPUS.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))[line - 2]


# Row 85 by hand from tests/e2e/nightly/multi_node/internal_dp/config/Qwen3-235B-disagg-pd.yaml @67b1ac5e
# (vllm-project/vllm-ascend): prefiller_host_index [0], decoder_host_index [1] -> 1:1; prefill server_cmd
# --data-parallel-size 2 --tensor-parallel-size 8 --enable-expert-parallel -> tp 8 dp 2 ep 16,
# --max-num-batched-tokens 8192; decode --data-parallel-size 4 --tensor-parallel-size 4 --max-num-seqs 32
# --gpu-memory-utilization 0.9 -> tp 4 dp 4 ep 16, batch cap 32, fraction 0.9; benchmark perf: batch_size
# 700 (concurrency), num_prompts 2800, max_out_len 1500, GSM8K-in3500 (3500-token prompts), request_rate 11.2
# (x 1500 = 16 800 tok/s, far above the 2 425 tok/s floor: not arrival-bound, a closed loop).
ROW_85 = (
    "kvplan simulate -m Qwen/Qwen3-235B-A22B --card ascend-910c --dtype bf16 --kv-dtype bf16 --engine vllm "
    "--tp 4 --dp 4 --ep 16 --pd 1:1 --prefill-tp 8 --prefill-dp 2 --prefill-ep 16 --kv-link-gbps 25 "
    "--input-tokens 3500 --output-tokens 1500 --concurrency 700 --requests 2800 --max-batch 32 "
    "--max-batched-tokens 8192 --memory-fraction 0.9"
)


@pytest.mark.lab
def test_row_85_command_is_its_config_file() -> None:
    from lab.published import predict

    assert predict.pd_command(corpus_row(85), card="ascend-910c") == ROW_85


@pytest.mark.lab
@pytest.mark.parametrize("line", [77])
def test_pd_path_predicts_deepseek_v32_now_that_sparse_attention_is_modelled(line: int) -> None:
    """DeepSeek-V3.2 (row 77) lost its model reason when DeepSeek sparse attention was modelled (2026-12-05):
    only the P:D reason is left, and its P:D command runs."""
    from lab.published import predict

    row = corpus_row(line)
    assert predict._skip_reason(row) == predict.DISAGGREGATED
    text = predict.pd_command(row, card="ascend-910c")
    assert text is not None
    out = runner.invoke(app, [*shlex.split(text)[1:], "--json"])
    assert out.exit_code == 0, out.output[-400:]
    assert json.loads(out.stdout)["throughput"]["output_tokens_per_s"] > 0


@pytest.mark.lab
def test_every_disaggregated_vllm_ascend_row_has_its_deployment_read() -> None:
    from lab.published import pd_deployments, predict

    with CORPUS.open(encoding="utf-8") as handle:
        rows = [
            r for r in csv.DictReader(handle) if r["engine"] == "vllm-ascend" and predict.is_disaggregated(r)
        ]
    # rows 61 and 67 (DeepSeek-V4-Pro) state no prompt length, row 109 (dtype found 2026-12-06) no
    # concurrency: skipped before any layout
    with_layout = [r for r in rows if r["dtype"] and r["input_tokens"] and r["concurrency"]]
    assert len(with_layout) == 22  # + row 66, corrected 2026-12-05: its config routes P:D
    assert all(pd_deployments.deployment_of(r) is not None for r in with_layout)


@pytest.mark.lab
@pytest.mark.parametrize(("line", "method", "drafts"), [(62, "dflash", 15), (66, "eagle3", 3)])
def test_pd_command_carries_the_rows_draft_model_and_cached_prefix(
    line: int, method: str, drafts: int
) -> None:
    """A P:D row that also drafts with a separate model and runs a prefix90 dataset is simulated with both, as
    its config file runs it (Kimi-K2.6 dflash 15 on the decoder; MiniMax-M2.7 eagle3 3)."""
    from lab.published import predict

    row = corpus_row(line)
    assert predict._skip_reason(row) == predict.DISAGGREGATED
    args = shlex.split(predict.pd_command(row, card="ascend-910c") or "")
    spec = json.loads(args[args.index("--speculative-config") + 1])
    assert spec == {"method": method, "num_speculative_tokens": drafts}
    assert args[args.index("--prefix-cached-fraction") + 1] == "0.9"
