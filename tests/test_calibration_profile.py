"""calibrate -> profile -> plan on CPU (tiny sizes), the coefficient mapping, and the profile writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from calibration.bounds import MIN_PLAUSIBLE_FRACTION, implausible, screened
from calibration.calibrate import coefficients_from
from calibration.device import torch_install_hint
from calibration.microbench import Measurements
from calibration.profile_writer import replace_measured, write_atomic, write_profile
from planner import catalog
from planner.cli import app
from planner.errors import KvplanError, OutputExistsError
from planner.schema import MIN_FRACTION, MeasuredBlock, PerfCoefficients
from tests.helpers import h200_points_of, kvplan

H200 = catalog.data_dir("hwprofiles") / "nvidia-h200.yaml"


def _one(seconds: float) -> dict[str, object]:
    return {"spread_fraction": 0.0, "samples_s": [seconds]}


def _synthetic_measurements() -> Measurements:
    meas = Measurements(device="synthetic")
    meas.add("kernels", mode="graph", median_s=2e-6, spread_fraction=0.0, samples_s=[2e-6])
    meas.add("step", median_s=50e-6, spread_fraction=0.0, samples_s=[50e-6])
    # 96 MB in 30 us + 2 us overhead -> 3.2 TB/s of weights; per batch, summed over shapes
    meas.add(
        "gemv", dtype="bf16", batch=1, bytes=96e6, median_s=32e-6, spread_fraction=0.0, samples_s=[32e-6]
    )
    meas.add("gemv", dtype="bf16", batch=64, bytes=96e6, median_s=1e-3, spread_fraction=0.0, samples_s=[1e-3])
    # 1 GB of KV in 402 us -> 2.5e12 B/s after the 2 us overhead; the 1 MB point is below the fit threshold
    geometry = {"kv_heads": 8, "head_dim": 128}
    meas.add("attention", bytes=1e9, median_s=402e-6, batch=64, ctx=7629, **geometry, **_one(402e-6))
    meas.add("attention", bytes=1e6, median_s=50e-6, batch=1, ctx=244, **geometry, **_one(50e-6))
    meas.add(
        "gemm",
        dtype="bf16",
        flop=2 * 8192**3,
        median_s=2 * 8192**3 / 700e12,
        spread_fraction=0.0,
        samples_s=[1.0],
    )
    return meas


def test_coefficients_from_measurements() -> None:
    hw = catalog.load_card("nvidia-h200")  # datasheet 4800 GB/s, bf16 989.4 TFLOP/s
    c = coefficients_from(_synthetic_measurements(), hw, min_attn_bytes=256 * 2**20)
    assert c.weight_read_bandwidth_fraction == pytest.approx(3.2e12 / 4.8e12)  # batch 64 (> 16) is ignored
    assert c.kv_read_bandwidth_fraction == pytest.approx(2.5e12 / 4.8e12)
    assert c.compute_fraction["bf16"] == pytest.approx(700 / 989.4)
    assert c.compute_fraction["fp8"] == hw.default_coefficients.compute_fraction["fp8"]  # not measured: kept
    assert c.kernel_overhead_us == pytest.approx(2.0)
    assert c.step_overhead_us == pytest.approx(50.0)
    assert c.matmul_latency_us == hw.default_coefficients.matmul_latency_us  # one GEMV size: no latency fit
    assert c.kernel_overhead_table is None
    table = c.attention_table or []
    assert [(p.batch, p.ctx_tokens) for p in table] == [(64, 7629), (1, 244)]
    assert table[0].gb_per_s == pytest.approx(1e9 / 402e-6 / 1e9)  # bytes / median time, in GB/s


def test_gemv_latency_fit_recovers_latency_and_bandwidth() -> None:
    # t = 5 us + bytes / 4e12 B/s exactly over three sizes -> latency 5 us, fraction 4.0 / 4.8
    meas = _synthetic_measurements()
    meas.rows["gemv"] = []
    for size in (2e6, 50e6, 400e6):
        t = 5e-6 + size / 4e12
        meas.add("gemv", dtype="bf16", batch=1, bytes=size, median_s=t, **_one(t))
    c = coefficients_from(meas, catalog.load_card("nvidia-h200"), min_attn_bytes=0)
    assert c.matmul_latency_us == pytest.approx(5.0, rel=1e-6)
    assert c.weight_read_bandwidth_fraction == pytest.approx(4.0 / 4.8, rel=1e-6)


def test_decode_chain_sets_kernel_overhead_and_its_table() -> None:
    meas = _synthetic_measurements()
    for batch, us in ((64, 2.5), (1, 1.5), (8, 2.0)):
        meas.add("kernels", mode="decode_chain", batch=batch, median_s=us * 1e-6, **_one(us * 1e-6))
    c = coefficients_from(meas, catalog.load_card("nvidia-h200"), min_attn_bytes=0)
    assert c.kernel_overhead_us == pytest.approx(1.5)  # the chain at its smallest batch, not the empty kernel
    assert [(k.tokens, k.kernel_us) for k in c.kernel_overhead_table or []] == [
        (1, pytest.approx(1.5)),
        (8, pytest.approx(2.0)),
        (64, pytest.approx(2.5)),
    ]


def test_fraction_above_datasheet_is_clipped_and_noted() -> None:
    meas = _synthetic_measurements()
    meas.rows["gemm"][0]["median_s"] = 2 * 8192**3 / 2000e12  # 2 PFLOP/s in bf16: faster than the datasheet
    c = coefficients_from(meas, catalog.load_card("nvidia-h200"), min_attn_bytes=0)
    assert c.compute_fraction["bf16"] == 1.0
    assert any("clipped to 1" in n for n in meas.notes)


def test_replace_measured_keeps_every_other_line() -> None:
    source = H200.read_text(encoding="utf-8")
    block = "measured:\n  tool: x\n"
    replaced = replace_measured(source, block)
    kept = [line for line in source.splitlines() if not line.startswith(("measured:", "  ", "# written by"))]
    for line in kept:
        assert line in replaced.splitlines()
    assert replace_measured(replaced, block) == replaced  # idempotent


def test_write_atomic_refuses_to_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    write_atomic(target, "a: 1\n", force=False)
    with pytest.raises(OutputExistsError, match=r"^--out: .*p\.yaml already exists"):
        write_atomic(target, "a: 2\n", force=False)
    write_atomic(target, "a: 2\n", force=True)
    assert target.read_text() == "a: 2\n"
    # no temp file left behind; --force kept what it replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml", "p.yaml.bak"]
    assert (tmp_path / "p.yaml.bak").read_text() == "a: 1\n"


def test_committed_h200_profile_is_calibrated() -> None:
    hw = catalog.load_card("nvidia-h200")
    assert hw.measured is not None and hw.measured.backend == "cuda"
    assert hw.measured.device_name == "NVIDIA H200"
    assert hw.coefficients() == hw.measured.coefficients


@pytest.mark.slow  # torch (~4 s of CPU to import; tests/conftest.py)
def test_calibrate_profile_plan_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out, raw = tmp_path / "h200-cpu.yaml", tmp_path / "raw.json"
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "calibrate",
            "--card",
            "nvidia-h200",
            "--device",
            "cpu",
            "--dry-run",
            "--out",
            str(out),
            "--raw",
            str(raw),
            "--budget-s",
            "30",
        ],
    )
    assert result.exit_code == 0, result.output
    profile = yaml.safe_load(out.read_text())
    measured = MeasuredBlock.model_validate(profile["measured"])
    assert measured.backend == "cpu" and "torch" in measured.versions
    assert measured.samples["kernel_eager_us"] and raw.stat().st_size > 0
    assert profile["peak_tflop_per_s"] == yaml.safe_load(H200.read_text())["peak_tflop_per_s"]
    again = runner.invoke(
        app, ["calibrate", "--card", "nvidia-h200", "--device", "cpu", "--dry-run", "--out", str(out)]
    )
    assert again.exit_code == 2 and "already exists" in again.output
    plan = runner.invoke(app, ["--card", str(out), "--model", "qwen3-0.6b", "--ctx", "2k", "--batch", "4"])
    assert plan.exit_code == 0, plan.output
    # a CPU says nothing about an H200: the plan runs on the datasheet coefficients and says so
    assert "uncalibrated" in plan.output
    dry = catalog.resolve_card(str(out))
    assert not dry.is_calibrated and dry.coefficients() == dry.default_coefficients
    assert "dry run" in dry.calibration_status


@pytest.mark.slow  # torch (~4 s of CPU to import; tests/conftest.py)
def test_calibrate_json_is_the_profile_it_wrote(tmp_path: Path) -> None:
    """--json after the microbenchmarks: stdout the object alone (no progress bar, no notes), its
    coefficients, status and notes those of the profile written."""
    pytest.importorskip("torch")
    out = tmp_path / "cpu.yaml"
    args = ["--card", "ascend-910b3", "--device", "cpu", "--dry-run", "--budget-s", "1", "--out", str(out)]
    result = kvplan("calibrate --json", *args)
    payload = json.loads(result.stdout)
    measured = MeasuredBlock.model_validate(yaml.safe_load(out.read_text())["measured"])
    assert (payload["card"], payload["device"], payload["dry_run"]) == ("ascend-910b3", "cpu", True)
    assert (payload["status"], payload["notes"], payload["written"]) == (
        measured.status,
        measured.notes,
        str(out),
    )
    assert f"took {payload['elapsed_s']:.1f} s" in measured.notes and payload["raw_written"] is None
    written = measured.coefficients.model_dump()
    for name, value in payload["coefficients"].items():
        if isinstance(value, float):
            assert written[name] == pytest.approx(value, rel=1e-4), name
    assert payload["memory_bandwidth_gb_per_s"] == pytest.approx(measured.memory_bandwidth_gb_per_s, rel=1e-4)
    assert result.stderr == ""


@pytest.mark.slow  # a MAP fit over 14 rows, ~2 s of CPU
def test_from_bench_writes_a_fitted_profile(tmp_path: Path) -> None:
    out = tmp_path / "fitted.yaml"
    result = kvplan(
        "calibrate --card nvidia-h200 --from-bench", h200_points_of("qwen3-8b", tmp_path), "--out", out
    )
    assert "MAPE" in result.output
    measured = MeasuredBlock.model_validate(yaml.safe_load(out.read_text())["measured"])
    assert measured.backend == "bench-fit"
    assert len(measured.samples["fit_residual_fraction"]) == 14


def test_profile_writer_validates(tmp_path: Path) -> None:
    block = catalog.load_card("nvidia-h200").measured
    assert block is not None
    out = tmp_path / "copy.yaml"
    written = write_profile(H200, block, out=out, force=False)
    assert written.measured == block


@pytest.mark.parametrize(
    ("card", "device", "extra", "words"),
    [
        ("ascend-950pr", "cpu", [], "a CPU run measures this machine's CPU, not ascend-950pr"),
        ("ascend-950pr", "cuda:0", [], "--device cuda:0: measures a cuda device, not ascend-950pr"),
        ("nvidia-h200", "npu:0", [], "--device npu:0: measures a npu device, not nvidia-h200"),
        ("ascend-950pr", "npu:0", ["--dry-run"], "--dry-run: only with --device cpu"),
    ],
)
def test_calibrate_refuses_a_device_that_cannot_measure_the_card(
    tmp_path: Path, card: str, device: str, extra: list[str], words: str
) -> None:
    """Refused before any benchmark (torch is never imported) and nothing is written."""
    out = tmp_path / "p.yaml"
    result = CliRunner().invoke(
        app, ["calibrate", "--card", card, "--device", device, *extra, "--out", str(out)]
    )
    assert result.exit_code == 2
    assert words in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def _coefficients(**changes: object) -> PerfCoefficients:
    return catalog.load_card("nvidia-h200").default_coefficients.model_copy(update=changes)


def test_fraction_at_or_below_zero_reaches_the_screen_not_a_validation_error() -> None:
    """A stalled decode-attention timing (seen on a loaded CPU) gives a fraction below the profile field's
    floor; the run keeps the card's default and names the microbenchmark instead of exiting 1."""
    meas = _synthetic_measurements()
    for row in meas.rows["attention"]:
        row["median_s"] = 1e4  # 1 GB in three hours
    hw = catalog.load_card("nvidia-h200")
    c = coefficients_from(meas, hw, min_attn_bytes=0)
    assert c.kv_read_bandwidth_fraction == MIN_FRACTION
    assert any("kv_read" in n and "not a physical fraction" in n for n in meas.notes)
    notes: list[str] = []
    kept = screened(c, hw.default_coefficients, notes)
    assert kept.kv_read_bandwidth_fraction == hw.default_coefficients.kv_read_bandwidth_fraction
    assert any(n.startswith("not written, datasheet default kept: decode attention") for n in notes)


def test_implausible_coefficients_are_not_written_and_named() -> None:
    """A weight-streaming fraction of 0.0004 (a 20 s budget that never warmed up) keeps the datasheet
    default; the note names the microbenchmark; the plausible KV fraction stays."""
    base = catalog.load_card("nvidia-h200").default_coefficients
    measured = _coefficients(weight_read_bandwidth_fraction=0.0004, kv_read_bandwidth_fraction=0.7)
    notes: list[str] = []
    kept = screened(measured, base, notes)
    assert kept.weight_read_bandwidth_fraction == base.weight_read_bandwidth_fraction
    assert kept.kv_read_bandwidth_fraction == 0.7
    assert notes == [
        "not written, datasheet default kept: gemv (weight streaming): 0.0004 of the datasheet figure "
        f"(expected >= {MIN_PLAUSIBLE_FRACTION})"
    ]
    assert implausible(_coefficients(step_overhead_us=2e6)) == {
        "step_overhead_us": "decode step: 2e+06 us (expected <= 10000 us)"
    }


def test_a_run_where_nothing_measured_is_plausible_writes_nothing() -> None:
    base = catalog.load_card("nvidia-h200").default_coefficients
    measured = _coefficients(weight_read_bandwidth_fraction=0.001, compute_fraction={"bf16": 0.002})
    with pytest.raises(KvplanError, match=r"^calibrate: every measured coefficient is outside physical"):
        screened(measured, base, [])


@pytest.mark.parametrize(("kind", "words"), [("cpu", "download.pytorch.org/whl/cpu"), ("npu", "CANN line")])
def test_missing_torch_hint_fits_the_device(kind: str, words: str) -> None:
    assert words in torch_install_hint(kind)


def test_existing_outputs_are_refused_by_their_own_flag_before_any_work(tmp_path: Path) -> None:
    """--raw naming an existing file is refused as --raw (not --out), and --from-bench with an existing
    --out stops before the fit reads or prints anything: one line on stderr, nothing on stdout."""
    runner = CliRunner()
    (tmp_path / "existing.json").write_text("{}")
    raw = runner.invoke(
        app,
        ["calibrate", "--card", "ascend-910b3", "--device", "cpu", "--dry-run", "--budget-s", "1",
         "--out", str(tmp_path / "new.yaml"), "--raw", str(tmp_path / "existing.json")],
    )  # fmt: skip
    assert raw.exit_code == 2 and raw.stderr.startswith("kvplan: error: --raw: ")
    (tmp_path / "rows.csv").write_text("not read: the output check comes first\n")
    (tmp_path / "existing.yaml").write_text("x")
    fit = runner.invoke(
        app,
        ["calibrate", "--card", "ascend-910b3", "--from-bench", str(tmp_path / "rows.csv"),
         "--out", str(tmp_path / "existing.yaml")],
    )  # fmt: skip
    assert fit.exit_code == 2 and fit.stdout == "" and fit.stderr.startswith("kvplan: error: --out: ")
