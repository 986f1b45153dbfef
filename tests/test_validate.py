"""Bench-point CSV parsing and `kvplan validate` (pure: no torch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.errors import DataFileError
from planner.fit import solver
from planner.importers.benchpoints import read_bench_points
from tests.helpers import H200_POINTS, kvplan, write_csv

HEADER = "model,card,dtype,kv_dtype,tp,batch,ctx,decode_step_s,tokens_per_s\n"
H200_BF16 = "qwen3-8b,nvidia-h200,bf16,bf16,1"  # the columns model..tp of every row below


def _csv(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    return write_csv(tmp_path / "points.csv", header, *rows)


def test_reads_step_or_throughput(tmp_path: Path) -> None:
    path = _csv(tmp_path, f"{H200_BF16},8,2k,0.01,", f"{H200_BF16},8,512,,400")
    first, second = read_bench_points(path)
    assert first.ctx_tokens == 2048  # "2k" = 2 * 1024
    assert second.decode_step_s == pytest.approx(8 / 400)  # batch / tokens_per_s


def test_errors_name_file_line_and_column(tmp_path: Path) -> None:
    path = _csv(tmp_path, f"{H200_BF16},0,512,0.01,")
    with pytest.raises(DataFileError, match=r"points\.csv:2: column batch: must be a int > 0 \(got '0'\)"):
        read_bench_points(path)


def test_missing_time_column(tmp_path: Path) -> None:
    path = _csv(tmp_path, f"{H200_BF16},1,512", header="model,card,dtype,kv_dtype,tp,batch,ctx\n")
    missing = "missing column decode_step_s, tokens_per_s or per_user_tokens_per_s"
    with pytest.raises(DataFileError, match=rf"points\.csv:1: header: {missing}"):
        read_bench_points(path)


def test_per_user_tokens_per_s_column(tmp_path: Path) -> None:
    header = "model,card,dtype,kv_dtype,tp,batch,ctx,per_user_tokens_per_s\n"
    (point,) = read_bench_points(_csv(tmp_path, f"{H200_BF16},8,512,11", header=header))
    assert point.decode_step_s == pytest.approx(1 / 11)  # one sequence's rate: step = 1 / per-user tok/s


def test_unknown_model_names_the_point(tmp_path: Path) -> None:
    path = _csv(tmp_path, "qwen9-8b,nvidia-h200,bf16,bf16,1,1,512,0.01,")
    with pytest.raises(DataFileError, match=r"points\.csv:2: unknown model card 'qwen9-8b'"):
        solver.prediction_errors(read_bench_points(path))


def test_validate_prints_mape_and_worst(tmp_path: Path) -> None:
    path = _csv(tmp_path, f"{H200_BF16},1,512,0.005,", f"{H200_BF16},8,2048,0.02,")
    errors = solver.prediction_errors(read_bench_points(path))
    result = kvplan("validate", path)
    mape = sum(abs(e) for e in errors) / 2 * 100
    assert f"MAPE {mape:.1f} %" in result.output
    assert "worst" in result.output


def test_validate_bad_file_exits_2(tmp_path: Path) -> None:
    result = kvplan("validate", tmp_path / "absent.csv", code=2)
    assert "cannot read file" in result.output


def test_committed_h200_points_parse() -> None:
    points = read_bench_points(H200_POINTS)
    assert len(points) == 69  # 5 models x 15 grid points, minus 6 whose KV cache does not fit 139 GiB
