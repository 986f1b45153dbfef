"""Issue 9 item 3: result files of the load tools people run -> serving bench rows (`kvplan bench import`).

Fixtures (tests/fixtures/bench_results/, README there) follow each tool's documented layout; expected values
are computed here from the fixture's own fields, so a parser that reads the wrong field fails.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import DataFileError
from planner.importers import servingfiles, servingresult
from planner.importers.benchpoints import read_bench_rows
from tests.helpers import replacing

FIXTURES = Path(__file__).parent / "fixtures" / "bench_results"
VLLM = FIXTURES / "vllm_bench_serve.json"
AIS_JSON = FIXTURES / "aisbench" / "gsm8kdataset.json"
AIS_CSV = FIXTURES / "aisbench" / "gsm8kdataset.csv"
GENAI = FIXTURES / "genai_perf_profile_export_genai_perf.csv"
runner = CliRunner()
SETUP = ["--model", "Qwen/Qwen3-8B", "--card", "ascend-910b3", "--dtype", "int8", "--tp", "1"]


def _unit_value(text: str) -> float:
    return float(text.split()[0])


def test_vllm_bench_json_fields() -> None:
    raw = json.loads(VLLM.read_text())
    result = servingfiles.read_serving_result(VLLM)
    assert result.tool == "vllm-bench-serve"
    assert result.concurrency == raw["max_concurrency"]
    assert result.input_tokens == round(raw["total_input_tokens"] / raw["completed"])
    assert result.output_tokens == round(raw["total_output_tokens"] / raw["completed"])
    assert result.output_tokens_per_s == pytest.approx(raw["output_throughput"])
    assert result.ttft_s == pytest.approx(raw["mean_ttft_ms"] / 1000)
    assert result.tpot_s == pytest.approx(raw["mean_tpot_ms"] / 1000)
    assert result.duration_s == pytest.approx(raw["duration"])


def test_vllm_bench_without_cap_sends_all_prompts_at_once(tmp_path: Path) -> None:
    raw = {**json.loads(VLLM.read_text()), "max_concurrency": None}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(raw))
    assert servingfiles.read_serving_result(path).concurrency == raw["num_prompts"]


@pytest.mark.parametrize("path", [AIS_JSON, AIS_CSV], ids=["json", "csv"])
def test_aisbench_json_and_csv_pair(path: Path) -> None:
    raw = json.loads(AIS_JSON.read_text())
    rows = {r["Performance Parameters"]: r for r in csv.DictReader(AIS_CSV.read_text().splitlines())}
    result = servingfiles.read_serving_result(path)
    assert result.tool == "aisbench"
    assert result.concurrency == raw["Max Concurrency"]["total"]
    requests = raw["Success Requests"]["total"]
    assert result.input_tokens == round(raw["Total Input Tokens"]["total"] / requests)
    assert result.output_tokens == round(raw["Total generated tokens"]["total"] / requests)
    assert result.output_tokens_per_s == pytest.approx(_unit_value(raw["Output Token Throughput"]["total"]))
    assert result.ttft_s == pytest.approx(_unit_value(rows["TTFT"]["Average"]) / 1000)
    assert result.tpot_s == pytest.approx(_unit_value(rows["TPOT"]["Average"]) / 1000)
    assert result.duration_s == pytest.approx(_unit_value(raw["Benchmark Duration"]["total"]) / 1000)


def test_a_concurrency_flag_never_overrides_the_files_own(tmp_path: Path) -> None:
    """--concurrency fills a file's missing cap (genai-perf) but never replaces the cap a vllm bench JSON
    records; a fractional max_concurrency is refused, not truncated."""
    raw = json.loads(VLLM.read_text())
    assert (
        servingfiles.read_serving_result(VLLM, concurrency=raw["max_concurrency"]).concurrency
        == raw["max_concurrency"]
    )
    with pytest.raises(DataFileError, match=r"at most \d+ requests at once, not --concurrency 999"):
        servingfiles.read_serving_result(VLLM, concurrency=999)
    path = tmp_path / "half.json"
    path.write_text(json.dumps({**raw, "max_concurrency": 32.5}))
    with pytest.raises(DataFileError, match=r"max_concurrency: not a whole count >= 1 \(got 32.5\)"):
        servingfiles.read_serving_result(path)


def test_aisbench_csv_without_its_json_is_one_clear_error(tmp_path: Path) -> None:
    lone = tmp_path / "x.csv"
    lone.write_text(AIS_CSV.read_text())
    with pytest.raises(DataFileError, match=r"x\.csv: Output Token Throughput: needs the AISBench JSON"):
        servingfiles.read_serving_result(lone)


def test_genai_perf_csv_needs_concurrency_from_the_caller() -> None:
    table = {r[0]: r for r in csv.reader(GENAI.read_text().splitlines()) if r}
    result = servingfiles.read_serving_result(GENAI)
    assert result.tool == "genai-perf" and result.concurrency is None
    assert result.output_tokens_per_s == pytest.approx(
        float(table["Output Token Throughput (tokens/sec)"][1])
    )
    assert result.output_tokens == round(float(table["Output Sequence Length (tokens)"][1]))
    assert result.input_tokens == round(float(table["Input Sequence Length (tokens)"][1]))
    assert result.ttft_s == pytest.approx(float(table["Time To First Token (ms)"][1]) / 1000)
    with pytest.raises(DataFileError, match="concurrency: not recorded in this file"):
        servingresult.bench_row(result, setup={})
    assert servingfiles.read_serving_result(GENAI, concurrency=16).concurrency == 16


def test_cli_writes_one_row_per_file_with_the_setup_columns(tmp_path: Path) -> None:
    out = tmp_path / "rows.csv"
    args = ["bench", "import", str(VLLM), str(AIS_JSON), str(GENAI), *SETUP, "--concurrency", "32"]
    result = runner.invoke(app, [*args, "--engine", "vllm", "--mtp", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert [r["tool"] for r in rows] == ["vllm-bench-serve", "aisbench", "genai-perf"]
    assert list(rows[0]) == list(servingresult.ROW_COLUMNS)
    for row in rows:
        assert (row["model"], row["card"], row["dtype"], row["tp"], row["mtp"]) == (
            "Qwen/Qwen3-8B", "ascend-910b3", "int8", "1", "1",
        )  # fmt: skip
        assert row["concurrency"] == "32" and float(row["output_tokens_per_s"]) > 0
    again = runner.invoke(app, [*args, "--out", str(out)])
    assert again.exit_code == 2 and f"--out: {out}: already exists (got an existing file" in again.output
    assert (rows[0]["dp"], rows[0]["ep"]) == ("1", "1")  # default layout


def test_cli_layout_flags_fill_the_dp_and_ep_columns(tmp_path: Path) -> None:
    out = tmp_path / "rows.csv"
    setup = ["--model", "Qwen/Qwen3-30B-A3B", "--card", "ascend-910c", "--dtype", "int8", "--tp", "2"]
    served = _vllm_result(tmp_path, "Qwen/Qwen3-30B-A3B")  # the file's model_id must agree with --model
    result = runner.invoke(
        app, ["bench", "import", str(served), *setup, "--dp", "2", "--ep", "4", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    (row,) = list(csv.DictReader(out.read_text().splitlines()))
    assert (row["tp"], row["dp"], row["ep"]) == ("2", "2", "4")
    (point,) = read_bench_rows(out)[1]
    assert (point.dp, point.ep) == (2, 4)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "nope-1b"], "nope-1b"),
        (["--card", "nope-card"], "nope-card"),
        (["--engine", "tgi"], "--engine: unknown engine (got 'tgi'"),
        (["--dtype", "q3"], "--dtype: unknown weight dtype (got 'q3'"),
        (["--mtp-acceptance", "1.5"], "--mtp-acceptance: must be in [0, 1] (got 1.5)"),
        (["--ep", "0"], "--ep: must be >= 1 (got 0)"),
    ],
)
def test_cli_bad_setup_is_one_line(extra: list[str], message: str) -> None:
    result = runner.invoke(app, ["bench", "import", str(VLLM), *replacing(SETUP, extra)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvplan: error:") and message in lines[0]


def _vllm(**fields: object) -> str:
    base = {"completed": 4, "total_input_tokens": 40, "total_output_tokens": 8, "output_throughput": 5}
    return json.dumps({k: v for k, v in {**base, **fields}.items() if v is not None})


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.json", "[1, 2]", "expected a JSON object"),
        ("b.json", _vllm(completed=0), "total_input_tokens: no completed requests"),
        ("c.json", _vllm(total_output_tokens=None), "total_output_tokens: required field missing"),
        ("d.json", '{"Output Token Throughput": {"total": "fast token/s"}}', "expected a number in token/s"),
        (
            "e.csv",
            "Metric,avg\nTime To First Token (ms),5\n",
            "Output Token Throughput (tokens/sec): required",
        ),
        ("f.txt", "hello", "unknown result format"),
        ("g.json", _vllm(output_throughput=0), "output token throughput: must be > 0"),
        ("h.json", _vllm(output_throughput="nan"), "expected a number"),
        ("i.json", _vllm(output_throughput=-3), "output_throughput: must be in [0, 1e+11] (got '-3')"),
    ],
)
def test_bad_result_files_name_the_file_and_field(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataFileError, match=f"^{path}: .*") as info:
        servingfiles.read_serving_result(path, concurrency=4)
    assert message in str(info.value)


def test_imported_rows_are_serving_rows_kvplan_validate_reads(tmp_path: Path) -> None:
    rows = tmp_path / "rows.csv"
    imported = runner.invoke(app, ["bench", "import", str(VLLM), str(AIS_JSON), *SETUP, "--out", str(rows)])
    assert imported.exit_code == 0, imported.output
    from planner.importers.benchpoints import read_bench_rows

    steps, serving = read_bench_rows(rows)
    raw = json.loads(VLLM.read_text())
    assert not steps and len(serving) == 2
    assert serving[0].num_requests == raw["completed"] and serving[0].concurrency == raw["max_concurrency"]
    validated = runner.invoke(app, ["validate", str(rows)])
    assert validated.exit_code == 0, validated.output
    assert "serving" in validated.output


def _vllm_result(tmp_path: Path, model_id: str) -> Path:
    data = json.loads(VLLM.read_text())
    path = tmp_path / f"{model_id.replace('/', '_')}.json"
    path.write_text(json.dumps({**data, "model_id": model_id}))
    return path


def test_import_takes_the_model_and_dtype_from_a_quantized_checkpoints_model_id(tmp_path: Path) -> None:
    """Issue 25: the result's model_id was ignored and `vllm-ascend/Qwen3-32B-W8A8` refused."""
    result = runner.invoke(
        app,
        [
            "bench",
            "import",
            str(_vllm_result(tmp_path, "vllm-ascend/Qwen3-32B-W8A8")),
            "--card",
            "ascend-910b3",
        ],
    )
    assert result.exit_code == 0, result.output
    row = next(csv.DictReader(result.stdout.splitlines()))
    assert (row["model"], row["dtype"]) == ("qwen3-32b", "int8")  # W8A8 = kvplan's int8 scheme


def test_import_reads_a_quantized_repo_given_as_model_and_checks_the_dtype(tmp_path: Path) -> None:
    path = _vllm_result(tmp_path, "vllm-ascend/Qwen3-32B-W8A8")
    given = ["bench", "import", str(path), "--card", "ascend-910b3", "--model", "vllm-ascend/Qwen3-32B-W8A8"]
    assert runner.invoke(app, given).exit_code == 0
    clash = runner.invoke(app, [*given, "--dtype", "bf16"])
    assert clash.exit_code == 2
    assert (
        "--dtype: vllm-ascend/Qwen3-32B-W8A8 is a W8A8 checkpoint (got --dtype bf16, expected int8"
        in clash.output
    )


def test_import_refuses_a_model_that_contradicts_the_files_model_id(tmp_path: Path) -> None:
    path = _vllm_result(tmp_path, "Qwen/Qwen3-8B")
    result = runner.invoke(
        app, ["bench", "import", str(path), "--card", "ascend-910b3", "--model", "qwen3-32b"]
    )
    assert result.exit_code == 2
    assert f"--model: {path} was run with model_id 'Qwen/Qwen3-8B'" in result.output.replace("\n", "")
    local = _vllm_result(tmp_path, "/data/models/qwen3-32b")  # a local path: the flag says which model
    kept = runner.invoke(
        app, ["bench", "import", str(local), "--card", "ascend-910b3", "--model", "qwen3-32b"]
    )
    assert kept.exit_code == 0 and next(csv.DictReader(kept.stdout.splitlines()))["model"] == "qwen3-32b"


def test_a_run_that_lost_requests_is_imported_with_a_note(tmp_path: Path) -> None:
    """vllm bench's `failed` count reaches the import's notes (stderr), naming the file and the counts; a
    clean run gets no such note."""
    raw = json.loads(VLLM.read_text())
    lost = tmp_path / "lost.json"
    lost.write_text(json.dumps({**raw, "failed": 64, "completed": 64}))
    args = ["bench", "import", "--card", "ascend-910b3", "-m", raw.get("model_id") or "qwen3-8b"]
    result = CliRunner().invoke(app, [*args, str(lost)])
    assert result.exit_code == 0, result.output
    assert f"note: {lost}: 64 requests failed (of 128)" in result.stderr
    clean = CliRunner().invoke(app, [*args, str(VLLM)])
    assert clean.exit_code == 0 and "requests failed" not in clean.stderr
