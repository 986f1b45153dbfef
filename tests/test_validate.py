"""Bench-point CSV parsing and `kvplan validate` (pure: no torch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import DataFileError
from planner.importers.benchpoints import read_bench_points
from planner.perf import fit

HEADER = "model,card,dtype,kv_dtype,tp,batch,ctx,decode_step_s,tokens_per_s\n"


def _csv(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    path = tmp_path / "points.csv"
    path.write_text(header + body, encoding="utf-8")
    return path


def test_reads_step_or_throughput(tmp_path: Path) -> None:
    path = _csv(
        tmp_path, "qwen3-8b,nvidia-h200,bf16,bf16,1,8,2k,0.01,\nqwen3-8b,nvidia-h200,bf16,bf16,1,8,512,,400\n"
    )
    first, second = read_bench_points(path)
    assert first.ctx_tokens == 2048  # "2k" = 2 * 1024
    assert second.decode_step_s == pytest.approx(8 / 400)  # batch / tokens_per_s


def test_errors_name_file_line_and_column(tmp_path: Path) -> None:
    path = _csv(tmp_path, "qwen3-8b,nvidia-h200,bf16,bf16,1,0,512,0.01,\n")
    with pytest.raises(DataFileError, match=r"points\.csv:2: column batch: must be a int > 0 \(got '0'\)"):
        read_bench_points(path)


def test_missing_time_column(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "qwen3-8b,nvidia-h200,bf16,bf16,1,1,512\n",
        header="model,card,dtype,kv_dtype,tp,batch,ctx\n",
    )
    with pytest.raises(
        DataFileError,
        match=r"points\.csv:1: header: missing column decode_step_s, tokens_per_s or per_user_tokens_per_s",
    ):
        read_bench_points(path)


def test_per_user_tokens_per_s_column(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "qwen3-8b,nvidia-h200,bf16,bf16,1,8,512,11\n",
        header="model,card,dtype,kv_dtype,tp,batch,ctx,per_user_tokens_per_s\n",
    )
    (point,) = read_bench_points(path)
    assert point.decode_step_s == pytest.approx(1 / 11)  # one sequence's rate: step = 1 / per-user tok/s


def test_unknown_model_names_the_point(tmp_path: Path) -> None:
    path = _csv(tmp_path, "qwen9-8b,nvidia-h200,bf16,bf16,1,1,512,0.01,\n")
    with pytest.raises(DataFileError, match=r"points\.csv:2: unknown model card 'qwen9-8b'"):
        fit.prediction_errors(read_bench_points(path))


def test_validate_prints_mape_and_worst(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        "qwen3-8b,nvidia-h200,bf16,bf16,1,1,512,0.005,\nqwen3-8b,nvidia-h200,bf16,bf16,1,8,2048,0.02,\n",
    )
    errors = fit.prediction_errors(read_bench_points(path))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    mape = sum(abs(e) for e in errors) / 2 * 100
    assert f"MAPE {mape:.1f} %" in result.output
    assert "worst" in result.output


def test_validate_bad_file_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "absent.csv")])
    assert result.exit_code == 2
    assert "cannot read file" in result.output


def test_committed_h200_points_parse() -> None:
    points = read_bench_points(Path(__file__).resolve().parents[1] / "calibration/data/h200-e2e-decode.csv")
    assert len(points) == 69  # 5 models x 15 grid points, minus 6 whose KV cache does not fit 139 GiB
