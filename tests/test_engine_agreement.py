"""Issue 12: one max batch per engine. For the same flags, `kvplan --engine E`, E's config command
(`kvplan mindie`'s maxBatchSize, `kvplan vllm`'s --max-num-seqs), `kvplan serve --engine E` (its memory-bound
concurrency) and the dashboard's plan (dashboard.view.plan_for, the view-model the page shows, and its MindIE
download) give the same number, or all refuse with the same exit code. No command is given
--max-prefill-tokens: each sizes the activation peak with the one default
(deployment.default_max_prefill_tokens).
MindIE's maxBatchSize never exceeds the requests its predicted blocks hold."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dashboard import view
from planner import catalog, deployment
from planner.cli import app
from planner.errors import KvplanError
from planner.inputs import PlanRequest
from planner.kinds import ENGINES

runner = CliRunner()
CTX_TOKENS = 32768
CTX = "32k"
TPS = ("1", "8")
# Models that fit 8 x 950PR in bf16 at 32k (the grid must compare numbers there, not only refusals).
FIT_ON_8_950PR = (
    "qwen3-8b",
    "qwen3-32b",
    "qwen3.5-27b",
    "llama-3.1-70b",
    "qwen3-next-80b-a3b",
    "qwen3-235b-a22b",
)


def config_batch(engine: str, common: list[str]) -> tuple[int, int | None, dict]:
    """(exit code, batch the config command writes, its JSON payload); transformers has no config command."""
    extra = ["--weights-path", "/w"]  # vllm: no repo is printed for weights it does not know
    result = runner.invoke(app, [engine, *common, *extra, "--json"])
    if result.exit_code:
        return result.exit_code, None, {}
    payload = json.loads(result.output)
    if engine == "vllm":
        return 0, int(dict(payload["vllm"]["args"])["--max-num-seqs"]), payload
    schedule = payload["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]
    return 0, int(schedule["maxBatchSize"]), payload


def serve_batch(engine: str, model: str, card: str, tp: str) -> tuple[int, int | None]:
    """`kvplan serve` with the default input/output split of --ctx: its memory-bound concurrency."""
    output = deployment.default_output_tokens(CTX_TOKENS, block_size_tokens=128)
    flags = ["--model", model, "--card", card, "--tp", tp, "--engine", engine]
    lengths = ["--input-tokens", str(CTX_TOKENS - output), "--output-tokens", str(output)]
    result = runner.invoke(app, ["serve", *flags, *lengths, "--json"])
    if result.exit_code:
        return result.exit_code, None
    return 0, int(json.loads(result.output)["estimate"]["concurrency"])


def dashboard_batch(engine: str, model: str, card: str, tp: str) -> tuple[int, int | None, int | None]:
    """(exit code, the dashboard's max batch, the maxBatchSize of its MindIE download or None)."""
    request = PlanRequest(model=model, card=card, ctx=CTX, tp=int(tp), engine=engine)
    try:
        dep, plan = view.plan_for(request)
    except KvplanError as exc:
        return exc.exit_code, None, None
    download = None
    if engine == "mindie":
        text, _ = view.mindie_config_text(dep, weights_path="/w")
        download = json.loads(text)["BackendConfig"]["ScheduleConfig"]["maxBatchSize"]
    return 0, plan.recommendation.max_batch_size, download


# Every profile (its default variant) and every other variant of it (e.g. ascend-950pr-64g).
CARDS = [
    *catalog.card_ids(),
    *(v for v, card in catalog.variant_map().items() if v != catalog.load_card(card).variant_id),
]


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("model", catalog.model_ids())
def test_every_command_gives_the_same_max_batch(model: str, card: str, engine: str) -> None:
    for tp in TPS:
        common = ["--model", model, "--card", card, "--ctx", CTX, "--tp", tp]
        planned = runner.invoke(app, [*common, "--engine", engine, "--json"])
        plan_batch = None if planned.exit_code else json.loads(planned.output)["recommendation"]
        dash_code, dash_batch, download = dashboard_batch(engine, model, card, tp)
        answers = {
            "plan": (planned.exit_code, plan_batch and plan_batch["max_batch_size"]),
            "serve": serve_batch(engine, model, card, tp),
            "dashboard": (dash_code, dash_batch),
        }
        if engine != "transformers":
            code, batch, payload = config_batch(engine, common)
            answers[engine] = (code, batch)
            if engine == "mindie" and not code:
                assert batch <= payload["mindie"]["prediction"]["concurrency"]
                assert download == batch
        assert len(set(answers.values())) == 1, (tp, answers, planned.output[-300:])
        if card == "ascend-950pr" and tp == "8" and model in FIT_ON_8_950PR:
            assert planned.exit_code == 0  # the grid compares numbers, not only refusals


def test_the_mission_case_agrees() -> None:
    """The README's mission (Qwen3-27B, 32k, fp8 on the 950PR): plan and mindie size the same memory."""
    flags = ["--model", "qwen3-27b", "--ctx", CTX, "--dtype", "fp8"]
    plan = json.loads(runner.invoke(app, [*flags, "--json"]).output)
    code, batch, payload = config_batch("mindie", flags)
    assert code == 0 and plan["recommendation"]["max_batch_size"] == batch
    assert batch <= payload["mindie"]["prediction"]["concurrency"]
    assert plan["memory"] == payload["plan"]["memory"]


def test_default_prefill_is_what_the_configs_write() -> None:
    """The plan's activation peak is sized with max(8192, ctx - ctx/4): unchanged at short contexts."""
    assert deployment.default_max_prefill_tokens(4096, block_size_tokens=128) == 8192
    assert deployment.default_max_prefill_tokens(CTX_TOKENS, block_size_tokens=128) == 24576
    short = runner.invoke(app, ["--model", "qwen3-8b", "--json"])
    explicit = runner.invoke(app, ["--model", "qwen3-8b", "--max-prefill-tokens", "8192", "--json"])
    assert json.loads(short.output)["memory"] == json.loads(explicit.output)["memory"]


def test_mindie_refuses_fp8_kv_cache() -> None:
    for command in (["mindie", "--weights-path", "/w"], ["--engine", "mindie"]):
        result = runner.invoke(app, [*command, "--model", "qwen3-8b", "--kv-dtype", "fp8"])
        assert result.exit_code == 2
        assert "MindIE has no FP8 KV cache" in result.output and "int8 (C8" in result.output


def test_mindie_batch_never_exceeds_its_blocks_with_explicit_lengths() -> None:
    """Lengths that straddle blocks (1025 + 975 > ceil(2000 / 128) blocks) and whole-GiB npuMemSize hold
    fewer requests than the ctx-sized plan: the written maxBatchSize is lowered to what the blocks hold."""
    flags = ["--model", "qwen3-8b", "--ctx", "2000", "--weights-path", "/w", "--npu-mem-size", "explicit"]
    lengths = ["--max-input-tokens", "1025", "--max-output-tokens", "975"]
    result = runner.invoke(app, ["mindie", *flags, *lengths, "--json"])
    payload = json.loads(result.output)
    written = payload["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]["maxBatchSize"]
    held = payload["mindie"]["prediction"]["concurrency"]
    assert written == held < payload["plan"]["recommendation"]["max_batch_size"]
    assert any(note.startswith(f"maxBatchSize {held}, not the plan's") for note in payload["mindie"]["notes"])
