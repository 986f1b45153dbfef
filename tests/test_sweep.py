"""Grid sweep: agreement with the scalar path, memory fit vs the plan, and the `kvplan sweep` command."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from planner.cli.sweep import parse_batches
from planner.deployment import Deployment
from planner.errors import PlanInputError
from planner.perf import roofline
from planner.plan import compose as perf_plan
from planner.serving import sweep
from tests.helpers import deployment_950pr, kvplan


def deployment(model_id: str = "qwen3.5-27b", **kw: object) -> Deployment:
    return deployment_950pr(model_id, **kw)


def test_grid_matches_scalar_path() -> None:
    dep = deployment(mtp_tokens=1, mtp_acceptance_fraction=0.8)
    result = sweep.sweep(dep, batch=[1, 7, 64], ctx_tokens=[100, 4096, 65536], weight_dtypes=["fp8", "w4a16"])
    assert result.decode_step_s.shape == (2, 3, 3)
    for i, scheme in enumerate(result.weight_dtypes):
        scheme_dep = sweep.with_scheme(dep, weight_dtype=scheme)
        for j, batch in enumerate([1, 7, 64]):
            for k, ctx in enumerate([100, 4096, 65536]):
                step = roofline.decode_step_s(scheme_dep, batch=batch, ctx_tokens=ctx)
                assert result.decode_step_s[i, j, k] == pytest.approx(step, rel=1e-12)
                assert result.per_user_tokens_per_s[i, j, k] == pytest.approx(1.8 / step, rel=1e-12)
                assert result.tokens_per_s[i, j, k] == pytest.approx(batch * 1.8 / step, rel=1e-12)


def test_fits_memory_agrees_with_plan() -> None:
    """The plan's max batch at ctx fits; one more sequence does not."""
    dep = deployment(ctx_tokens=32768)
    max_batch = perf_plan.build_plan(dep, with_performance=False).recommendation.max_batch_size
    result = sweep.sweep(dep, batch=[max_batch, max_batch + 1], ctx_tokens=[32768])
    assert result.fits_memory[0, :, 0].tolist() == [True, False]


def test_parse_batches() -> None:
    assert parse_batches("1-4,8, 2") == [1, 2, 3, 4, 8]
    with pytest.raises(PlanInputError, match=r"^--batch: not a batch list \(got 'x'"):
        parse_batches("x")
    with pytest.raises(PlanInputError, match=r"^--batch: batch sizes must be >= 1"):
        parse_batches("0-2")


def test_cli_sweep_csv() -> None:
    # --uncalibrated: deployment()'s datasheet profile, not the seed-fitted 950PR/mindie one
    out = kvplan("sweep -m qwen3-27b --dtype fp8,bf16 --batch 1,8 --ctx 256,8k --format csv --uncalibrated")
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert len(rows) == 2 * 2 * 2
    first = rows[0]
    assert (first["weight_dtype"], first["batch"], first["ctx_tokens"]) == ("fp8", "1", "256")
    dep = deployment()
    assert float(first["decode_step_s"]) == pytest.approx(
        roofline.decode_step_s(dep, batch=1, ctx_tokens=256), rel=1e-5
    )  # CSV keeps 6 significant digits


def test_cli_sweep_json_and_table() -> None:
    out = kvplan("sweep -m qwen3-27b --dtype fp8 --batch 1-3 --ctx 1k --format json")
    payload = json.loads(out.stdout)
    assert payload["batch"] == [1, 2, 3] and payload["ctx_tokens"] == [1024]
    assert np.asarray(payload["decode_step_s"]).shape == (1, 3, 1)
    table = kvplan("sweep -m qwen3-27b --dtype fp8 --batch 1 --ctx 1k")
    assert "tok/s" in table.stdout


def test_cli_sweep_bad_format_exits_2() -> None:
    out = kvplan("sweep -m qwen3-27b --format xml", code=2)
    assert "--format: unknown format (got 'xml'" in out.output


def test_cli_serve_answers_the_slo_with_the_simulated_tail() -> None:
    """serve with a TPOT SLO and no --concurrency: the most users whose simulated P99 TPOT meets it
    (planner/sim/slo.py, the search `simulate --search max-concurrency` runs); the run it prints is at that
    load, and its own simulated tail meets the target (the headline never contradicts the simulation)."""
    # --uncalibrated: deployment()'s datasheet profile, not the seed-fitted 950PR/mindie one
    words = "serve -m qwen3-27b --dtype fp8 --tpot-ms 50 --input-tokens 256 --output-tokens 128 --json"
    payload = json.loads(kvplan(words, "--uncalibrated").stdout)
    best = payload["slo"]["best"]
    assert payload["slo"]["kind"] == "max-concurrency" and payload["slo"]["quantile"] == "p99"
    assert best is not None and payload["estimate"]["concurrency"] == best
    assert payload["simulated"]["tpot_s"]["p99"] <= 0.05
    above = [p for p in payload["slo"]["points"] if p["x"] > best]
    assert above and not any(p["meets_slo"] for p in above)  # one more user misses it


def test_backwards_batch_range_is_named_as_such() -> None:
    """`--batch 5-1` said "batch sizes must be >= 1" (every size is >= 1); it is a range written backwards."""
    with pytest.raises(
        PlanInputError,
        match=r"range runs backwards \(got '5-1', expected low-high with 1 <= low <= high, such as 1-5\)",
    ):
        parse_batches("5-1")
    assert parse_batches("1-3,5") == [1, 2, 3, 5]


def test_backwards_range_suggests_a_valid_range() -> None:
    """`--batch 1-0` suggested "such as 0-1", itself refused (sizes start at 1); `--batch 99999999-1`
    suggested a range past the largest batch."""
    with pytest.raises(PlanInputError, match=r"got '1-0', expected .*such as 1-1\)$") as caught:
        parse_batches("1-0")
    assert parse_batches(str(caught.value).rsplit(" ", 1)[-1].rstrip(")")) == [1]
    with pytest.raises(PlanInputError, match=r"batch size out of range \(got '99999999-1'"):
        parse_batches("99999999-1")


def test_repeated_dtype_is_swept_once() -> None:
    """`--dtype fp8,fp8` printed two identical rows (--batch and --ctx were de-duplicated, --dtype was not);
    an alias of a listed scheme (w8a8-fp8 is fp8) is the same scheme."""
    out = kvplan("sweep -m qwen3-8b --dtype fp8,fp8,w8a8-fp8,bf16 --batch 1,1 --ctx 4k,4k --format csv")
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert [row["weight_dtype"] for row in rows] == ["fp8", "bf16"]


def test_json_flag_is_format_json() -> None:
    """`--json` as elsewhere: the object `--format json` prints; with `--format csv`, one error line."""
    words = "sweep -m qwen3-27b --batch 1,2 --ctx 1k"
    assert kvplan(f"{words} --json").stdout == kvplan(f"{words} --format json").stdout
    both = kvplan(f"{words} --json --format csv", code=2)
    assert both.output.startswith("kvplan: error: --json: conflicts with --format csv")
