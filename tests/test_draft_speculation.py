"""Speculation by a separate draft model (vLLM --speculative-config method eagle3 / dflash, issue 23).

Engine source the cases follow: vllm-ascend vllm_ascend/spec_decode/llm_base_proposer.py @67b1ac5e7a (one
drafter pass, then `for draft_index in range(num_speculative_tokens - 1)` more, each of `batch` tokens) and
dflash_proposer.py @2cd683a396 (one non-causal pass of batch * (1 + k) query tokens); the target verifies
1 + k tokens per sequence either way.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from planner import capacity, drafts
from planner.cli import app
from planner.deployment import Deployment
from planner.errors import PlanInputError
from planner.inputs import PlanRequest, to_deployment
from planner.perf import mtp, opcost, roofline
from planner.perf.opweights import op_weights
from planner.speculation import speculation

EAGLE3 = '{"method": "eagle3", "num_speculative_tokens": 3}'
EXTRA_KEY = '{"method": "eagle3", "num_speculative_tokens": 3, "x": 1}'
ROOT = Path(__file__).resolve().parents[1]


def qwen3_32b(method: str = "mtp", drafts_k: int = 0) -> Deployment:
    dep = to_deployment(
        PlanRequest(model="qwen3-32b", card="ascend-910c", dtype="bf16", tp=2, ctx="5000", engine="vllm")
    )
    return dep.model_copy(update={"speculative_method": method, "mtp_tokens": drafts_k})


def test_eagle3_draft_layer_weights_by_hand() -> None:
    """Qwen3-32B (H 5120, 64 heads, 8 KV heads, head_dim 128, intermediate 25600) at tp 2, per rank:
    fc 3H x H = 78_643_200; q 2H x 64*128/2 = 41_943_040; k, v 2H x 4*128 = 5_242_880 each;
    o 4096 x H = 20_971_520; gate_up H x 2*12800 = 131_072_000; down 12800 x H = 65_536_000;
    sum 348_651_520 matmul elements. Own head: 32000 / 2 rows x H = 81_920_000."""
    weights = op_weights(qwen3_32b("eagle3", 3))
    assert weights.matmul_elements["mtp.layer"] == 348_651_520
    assert weights.matmul_elements["mtp.lm_head"] == 81_920_000
    assert op_weights(qwen3_32b()).matmul_elements["mtp.layer"] == 0


def test_decode_step_is_verify_of_1_plus_k_and_k_draft_passes() -> None:
    """eagle3 k = 3 at batch 20: the target runs 20 x 4 tokens (4 logits rows each), the drafter 3 passes of
    20 tokens; its terms cost exactly 3 x one pass. dflash k = 7: one pass of 20 x 8 queries, 20 x 7 rows."""
    batch, ctx = np.asarray(20.0), np.asarray(4000.0)
    dep = qwen3_32b("eagle3", 3)
    step = roofline.decode_step(dep, batch=batch, ctx_tokens=ctx)
    assert (float(step.tokens), float(step.logits_tokens), step.draft_runs) == (80.0, 80.0, 3)
    assert float(step.draft_tokens) == 20.0
    geo, rate = roofline.geometry(dep), roofline.rates(dep)

    def draft_s(runs: int) -> float:
        terms = opcost.step_terms(geo, step.__class__(**{**step.__dict__, "draft_runs": runs}))
        return sum(float(roofline.term_time_s(t, rate=rate)) for t in terms if t.name.startswith("mtp."))

    assert draft_s(3) == pytest.approx(3 * draft_s(1), rel=1e-12)
    assert draft_s(1) > 0
    flash = roofline.decode_step(qwen3_32b("dflash", 7), batch=batch, ctx_tokens=ctx)
    assert (flash.draft_runs, float(flash.draft_tokens), float(flash.draft_logits)) == (1, 160.0, 140.0)
    assert float(flash.tokens) == 160.0


def test_drafting_costs_step_time_and_verify_tokens() -> None:
    plain = roofline.decode_step_s(qwen3_32b(), batch=20, ctx_tokens=4000)
    eagle = roofline.decode_step_s(qwen3_32b("eagle3", 3), batch=20, ctx_tokens=4000)
    assert eagle > plain


def test_acceptance_rate_in_vllms_words() -> None:
    """vLLM logs accepted / drafted; tokens per step = 1 + k x rate: 1 + 3 x 0.6 = 2.8."""
    method, k, a = speculation(mtp=0, mtp_acceptance=None, speculative_config=EAGLE3, acceptance_rate=0.6)
    assert (method, k) == ("eagle3", 3)
    dep = qwen3_32b("eagle3", 3).model_copy(update={"mtp_acceptance_fraction": a})
    assert mtp.tokens_per_step(dep) == pytest.approx(2.8, abs=1e-9)
    # without a rate a draft model takes the default per-draft acceptance 0.7: 1 + .7 + .49 + .343
    default = speculation(mtp=0, mtp_acceptance=None, speculative_config=EAGLE3, acceptance_rate=None)
    assert mtp.speculative_tokens_per_step(3, acceptance_fraction=default[2]) == pytest.approx(2.533)
    # both flags given is refused, the default value typed included (None means --mtp-acceptance not given)
    with pytest.raises(PlanInputError, match=r"^--acceptance-rate: give the acceptance once"):
        speculation(mtp=0, mtp_acceptance=0.7, speculative_config=EAGLE3, acceptance_rate=0.6)


def test_draft_weights_and_kv_count_in_memory() -> None:
    """Draft KV per token per rank, bf16, tp 2 (4 KV heads x 128 per rank): eagle3 1 layer 2*4*128*2 = 2048 B,
    dflash 5 layers 10_240 B; weights grow by the draft tensors' bytes."""
    plain, eagle, flash = qwen3_32b(), qwen3_32b("eagle3", 3), qwen3_32b("dflash", 7)
    base = capacity.memory_breakdown(plain).kv_bytes_per_token
    assert capacity.memory_breakdown(eagle).kv_bytes_per_token - base == 2048
    assert capacity.memory_breakdown(flash).kv_bytes_per_token - base == 10_240
    tensors = drafts.draft_model_tensors(eagle.model, method="eagle3", tp=2)
    # 2 bytes an element, matmuls and plain tensors alike: a draft stays 16-bit under a W8A8 target too
    draft_bytes = 2 * sum(t.elements for t in tensors)
    assert capacity.weight_bytes(eagle) - capacity.weight_bytes(plain) == draft_bytes
    int8 = {"weight_scheme_name": "int8"}
    eagle8, plain8 = eagle.model_copy(update=int8), plain.model_copy(update=int8)
    grown = capacity.weight_bytes(eagle8) - capacity.weight_bytes(plain8)
    assert grown == draft_bytes


def test_mtp_flag_keeps_its_meaning() -> None:
    assert speculation(mtp=2, mtp_acceptance=0.8, speculative_config=None, acceptance_rate=None) == (
        "mtp",
        2,
        0.8,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--speculative-config", "{nope"], "--speculative-config: not JSON"),
        (["--speculative-config", "[3]"], "--speculative-config: not a JSON object"),
        (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}'], "method not modelled"),
        (["--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 0}'], "out of range"),
        (["--speculative-config", EXTRA_KEY], "unknown key 'x' (expected method, "),
        (["--speculative-config", EAGLE3, "--mtp", "1"], "--mtp: give the drafts once"),
        (["--acceptance-rate", "0.5"], "--acceptance-rate: no speculative decoding"),
        (["--speculative-config", EAGLE3, "--acceptance-rate", "1.5"], "--acceptance-rate: out of range"),
        (["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}'], "ships no MTP layers"),
    ],
)
def test_cli_error_lines(args: list[str], message: str) -> None:
    base = ["serve", "-m", "qwen3-32b", "--card", "ascend-910c", "--tp", "2", "--engine", "vllm"]
    result = CliRunner().invoke(app, [*base, "--concurrency", "4", *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("kvplan: error: ")
    assert message in result.stderr


def test_cli_serve_takes_vllms_words() -> None:
    base = ["serve", "-m", "qwen3-32b", "--card", "ascend-910c", "--tp", "2", "--engine", "vllm", "--json"]
    load = ["--concurrency", "8", "--input-tokens", "1000", "--output-tokens", "200"]
    plain = CliRunner().invoke(app, [*base, *load])
    spec = ["--speculative-config", EAGLE3, "--acceptance-rate", "0.6"]
    eagle = CliRunner().invoke(app, [*base, *load, *spec])
    assert plain.exit_code == eagle.exit_code == 0, eagle.output
    assert '"tokens_per_step": 2.8' in eagle.stdout.replace("2.8000000000000003", "2.8")


def test_plan_request_rejects_speculation_errors_before_planning() -> None:
    with pytest.raises(PlanInputError, match=r"^--speculative-config: "):
        to_deployment(PlanRequest(model="qwen3-32b", speculative_config="{}"))


@pytest.mark.lab
def test_draft_model_rows_are_predicted_not_fitted() -> None:
    sys.path.insert(0, str(ROOT / "lab" / "published"))
    import predict

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    drafted = [(i, row) for i, row in enumerate(rows, start=2) if predict.draft_method(row)]
    assert len(drafted) == 18  # 16 + the P:D rows 62 (dflash) and 66 (eagle3), read from their configs
    for index, row in drafted:
        assert predict.not_fitted(index, row) is not None
        reason = predict._skip_reason(row)
        assert reason in (None, predict.DISAGGREGATED), (index, reason)
    with (ROOT / "lab" / "published" / "predictions-after.csv").open(encoding="utf-8") as handle:
        out = {row["row"]: row for row in csv.DictReader(handle)}
    predicted = [out[str(i)] for i, _ in drafted if out[str(i)]["status"] == "predicted"]
    assert len(predicted) == 18  # line 91 also runs a prefix90 dataset (--prefix-cached-fraction)
    assert all("--speculative-config" in row["command"] for row in predicted)


def test_engines_without_draft_models_refuse_one() -> None:
    """MindIE's speculative plugin is MTP only (docs/mindie.md): exit 2 naming the flag and the engine."""
    args = ["-m", "qwen3-32b", "--card", "ascend-910c", "--tp", "2", "--engine", "mindie"]
    result = CliRunner().invoke(app, [*args, "--speculative-config", EAGLE3])
    assert result.exit_code == 2
    expected = "kvplan: error: --speculative-config: mindie runs no separate draft model"
    assert result.stderr.startswith(expected)


def test_a_models_own_mtp_method_name_is_mtp() -> None:
    """vLLM takes deepseek_mtp, qwen3_next_mtp, ... as "mtp" (its MTP_MODEL_TYPES); kvplan did not (review
    h58: `method not modelled`). The config the vllm command prints says "mtp"."""
    from planner.speculation import parsed_speculative_config

    for name in ("deepseek_mtp", "qwen3_next_mtp", "glm4_moe_mtp"):
        assert parsed_speculative_config(f'{{"method": "{name}", "num_speculative_tokens": 2}}') == ("mtp", 2)
    with pytest.raises(PlanInputError, match="method not modelled"):
        parsed_speculative_config('{"method": "medusa", "num_speculative_tokens": 2}')
