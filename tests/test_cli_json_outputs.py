"""Every command that prints a result takes --json (the dashboard launcher prints none): one JSON object on
stdout, the same numbers as the text, errors still one line on stderr with the same exit code. Here the
commands that took it last (`calibrate` in each mode, `bench import`, `bench`, `models import`), each checked
against its text output or the file it wrote."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from planner import units
from planner.cli import app
from planner.fit import holdout
from planner.importers.servingresult import ROW_COLUMNS
from tests.test_cli_flags import every_command

ROOT = Path(__file__).resolve().parents[1]
STEPS = ROOT / "docs" / "examples" / "seed-950pr-qwen3-27b.csv"  # 4 decode-step rows, one model
SERVING = ROOT / "docs" / "examples" / "seed-950pr-serving.csv"  # 4 serving rows, one model
RESULTS = ROOT / "tests" / "fixtures" / "bench_results"
BENCH_FILES = [RESULTS / "vllm_bench_serve.json", RESULTS / "genai_perf_profile_export_genai_perf.csv"]
BENCH_SETUP = ["--model", "Qwen/Qwen3-8B", "--card", "ascend-910b3", "--dtype", "int8", "--concurrency", "32"]
SERVERS = {"dashboard"}  # starts a server; prints no result


def run(*args: str | Path, code: int = 0) -> Result:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result


def one_error_line(result: Result, code: int, starts: str) -> None:
    """--json's errors are the text's: one `kvplan: error:` line on stderr, nothing on stdout."""
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"kvplan: error: {starts}") and result.stderr.count("\n") == 1


def test_every_command_that_prints_a_result_takes_json() -> None:
    lacking = [
        path or "(plan)"
        for path, command in every_command().items()
        if path not in SERVERS and not any("--json" in param.opts for param in command.params)
    ]
    assert lacking == []


def table_rows(text: str) -> list[list[str]]:
    """The body rows of a rich table in `text`, each as its stripped cells."""
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if "│" in line]


def test_calibrate_from_bench_json_is_the_text_fit_and_the_written_profile(tmp_path: Path) -> None:
    text = run("calibrate", "--from-bench", STEPS, "--card", "ascend-950pr", "--out", tmp_path / "t.yaml")
    written = tmp_path / "j.yaml"
    fit = json.loads(run("calibrate", "--from-bench", STEPS, "--out", written, "--json").stdout)
    assert (fit["card"], fit["engine"], fit["source"], fit["written"]) == (
        "ascend-950pr", "mindie", str(STEPS), str(written),
    )  # fmt: skip
    # per row: measured, predicted and error as the table prints them
    for row, cells in zip(fit["decode_steps"], table_rows(text.stdout), strict=True):
        assert cells[-3:] == [
            units.fmt_duration(row["measured_decode_step_s"]),
            units.fmt_duration(row["predicted_decode_step_s"]),
            f"{row['error_fraction'] * units.PERCENT:+.1f} %",
        ]
    assert f"MAPE {units.fmt_fraction(fit['decode_step_mape_fraction'])};" in text.stdout
    assert fit["mape_fraction"] == fit["decode_step_mape_fraction"] and fit["serving"] == []
    for term in fit["fitted_terms"]:
        value, factor = f"{term['value']:10.4g}", f"{term['one_sigma_factor']:.2f}"
        assert f"  {term['name']:32s} {value}  x/ {factor}  ({term['set_by']}" in text.stdout
    batch = f"batch {fit['fit_range']['batch_min']:g}-{fit['fit_range']['batch_max']:g}"
    assert f"fitted range: {batch}, ctx 384-384 tokens" in text.stdout
    assert fit["held_out"] is None and fit["warnings"] == [] and "held out" not in text.stdout
    # the profile holds what the JSON says (written to 5 significant digits)
    measured = yaml.safe_load(written.read_text())["measured"]
    residuals = [row["error_fraction"] for row in fit["decode_steps"]]
    assert measured["samples"]["fit_residual_fraction"] == pytest.approx(residuals, rel=1e-4)
    assert measured["samples"]["fit_range"] == list(fit["fit_range"].values())
    for name, value in fit["coefficients"].items():
        if isinstance(value, float):
            assert measured["coefficients"][name] == pytest.approx(value, rel=1e-4), name
    logs = [math.log(term["value"]) for term in fit["fitted_terms"]]
    assert measured["samples"]["fit_log_value"] == pytest.approx(logs, rel=1e-4, abs=1e-9)


def test_calibrate_from_bench_json_says_the_held_out_test_it_ran_or_could_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One model's serving rows: not tested, as the text says; with the test's threshold lowered to one
    model and its answer fixed (the real refits: tests/test_fit_holdout.py), the range the profile keeps."""
    text = run("calibrate", "--from-bench", SERVING, "--out", tmp_path / "t.yaml")
    fit = json.loads(run("calibrate", "--from-bench", SERVING, "--out", tmp_path / "j.yaml", "--json").stdout)
    assert fit["held_out"] == {
        "tested": False, "models": 1, "models_needed": holdout.MIN_MODELS, "rows": 0, "models_refitted": 0,
        "median_abs_error_fraction": None, "low_factor": None, "high_factor": None,
    }  # fmt: skip
    assert f"not tested (1 model(s); leave-one-model-out needs {holdout.MIN_MODELS})" in text.stdout
    assert f"serving MAPE {units.fmt_fraction(fit['serving_mape_fraction'])};" in text.stdout
    for row, cells in zip(fit["serving"], table_rows(text.stdout), strict=True):
        assert cells[-2:] == [
            units.fmt_tokens_per_s(row["predicted_output_tokens_per_s"]),
            f"{row['error_fraction'] * units.PERCENT:+.1f} %",
        ]
    found = holdout.HeldOut(factors=[0.8, 1.25, 4.0], median_abs_error=0.07, models=1)
    monkeypatch.setattr(holdout, "MIN_MODELS", 1)
    monkeypatch.setattr(holdout, "summary", lambda rows, **_: found)
    result = run("calibrate", "--from-bench", SERVING, "--out", tmp_path / "h.yaml", "--json")
    held = json.loads(result.stdout)["held_out"]
    assert (held["tested"], held["rows"], held["models_refitted"]) == (True, 4, 1)
    assert (held["low_factor"], held["high_factor"], held["median_abs_error_fraction"]) == (0.8, 1.25, 0.07)
    measured = yaml.safe_load((tmp_path / "h.yaml").read_text())["measured"]
    assert measured["samples"]["held_out_factors"] == [0.8, 1.25, 4.0]
    assert "median |error| 7.0 %" in measured["notes"] and result.stderr == ""


def test_calibrate_json_errors_stay_one_line_with_their_exit_code(tmp_path: Path) -> None:
    existing = tmp_path / "existing.yaml"
    existing.write_text("x")
    refused = CliRunner().invoke(
        app, ["calibrate", "--from-bench", str(STEPS), "--out", str(existing), "--json"]
    )
    one_error_line(refused, 2, "--out: ")
    log = tmp_path / "empty.log"
    log.write_text("nothing here\n")
    args = ["calibrate", "--from-log", str(log), "--card", "nvidia-l40s", "--out", str(tmp_path / "l.yaml")]
    one_error_line(CliRunner().invoke(app, [*args, "--json"]), 2, f"--from-log {log}: no vLLM start-up line")


def test_calibrate_from_log_json_is_the_written_profile(tmp_path: Path) -> None:
    from tests.test_vllm_startup import LOG_10517

    log = tmp_path / "startup.log"
    log.write_text(LOG_10517, encoding="utf-8")
    text = run("calibrate", "--from-log", log, "--card", "nvidia-l40s", "--out", tmp_path / "t.yaml")
    out = tmp_path / "j.yaml"
    learned = json.loads(
        run("calibrate", "--from-log", log, "--card", "nvidia-l40s", "--out", out, "--json").stdout
    )
    profile = yaml.safe_load(out.read_text())
    after = learned["after"]
    assert {key: profile.get(key) for key in after} == after  # as written, variant null included
    assert learned["device_total_bytes"] == after["visible_memory_bytes"]
    samples = profile["measured"]["samples"]
    assert samples["vllm_activation_bytes"] == [pytest.approx(learned["activation_bytes"], rel=1e-4)]
    before = learned["before"]
    assert (
        f"device total {units.bytes_to_gib(units.gib_to_bytes(before['memory_capacity_gib'])):.4f} -> "
        f"{units.bytes_to_gib(after['visible_memory_bytes']):.4f} GiB (visible_memory_bytes), "
        f"runtime_overhead_gib {before['runtime_overhead_gib']:g} -> {after['runtime_overhead_gib']:.4f}"
    ) in text.stdout
    assert f"--memory-fraction {learned['gpu_memory_utilization']:g})" in text.stdout
    assert learned["written"] == str(out)


def test_bench_import_json_rows_are_the_csv_cells_as_numbers(tmp_path: Path) -> None:
    text = run("bench", "import", *BENCH_FILES, *BENCH_SETUP)
    out = tmp_path / "rows.csv"
    imported = json.loads(run("bench", "import", *BENCH_FILES, *BENCH_SETUP, "--out", out, "--json").stdout)
    assert out.read_text() == text.stdout  # --out holds the CSV the text prints
    cells = list(csv.DictReader(text.stdout.splitlines()))
    assert [list(row) for row in imported["rows"]] == [list(ROW_COLUMNS)] * 2
    for row, printed in zip(imported["rows"], cells, strict=True):
        for column, value in row.items():
            if value is None:
                assert printed[column] == "", column
            elif isinstance(value, str):
                assert printed[column] == value, column
            else:
                assert value == (int if isinstance(value, int) else float)(printed[column]), column
    assert [(f["path"], f["format"]) for f in imported["files"]] == [
        (str(BENCH_FILES[0]), "vllm-bench-serve"), (str(BENCH_FILES[1]), "genai-perf"),
    ]  # fmt: skip
    assert imported["files"][0]["completed_requests"] == imported["rows"][0]["num_prompts"]
    assert imported["written"] == str(out)
    assert [f"note: {note}" for note in imported["notes"]] == text.stderr.splitlines()
    missing = CliRunner().invoke(app, ["bench", "import", str(BENCH_FILES[1]), *BENCH_SETUP[:-2], "--json"])
    one_error_line(missing, 2, f"{BENCH_FILES[1]}: concurrency: not recorded")


def test_bench_lists_its_formats_as_json() -> None:
    listed = json.loads(run("bench", "--json").stdout)["formats"]
    text = run("bench").stdout
    for entry in listed:
        needs = f"; needs {entry['needs']}" if entry["needs"] else ""
        assert f"  {entry['files']} ({entry['format']}{needs})" in text
    assert [entry["format"] for entry in listed] == ["vllm-bench-serve", "aisbench", "genai-perf"]


def test_models_import_json_holds_the_card_yaml_and_the_checkpoint_check(tmp_path: Path) -> None:
    from tests.test_hfimport import TINY_LLAMA_PARAMETERS, tiny_llama_checkpoint

    root = tiny_llama_checkpoint(tmp_path / "Tiny-Llama")
    text = run("models", "import", root)
    imported = json.loads(run("models", "import", root, "--json").stdout)
    card = yaml.safe_load(text.stdout)
    assert imported["card"] == card and card["id"] == "tiny-llama"
    check = imported["checkpoint"]
    assert check["checkpoint_parameters"] == check["geometry_parameters"] == TINY_LLAMA_PARAMETERS
    assert check["difference_parameters"] == 0 and check["missing_shards"] == []
    bf16 = check["by_dtype"]["BF16"]
    assert f"  {'BF16':<8} {bf16['tensors']:>6} tensors {bf16['parameters']:>18,} params" in text.stderr
    out = tmp_path / "other-name.yaml"
    written = json.loads(run("models", "import", root, "--id", "tiny-llama", "--out", out, "--json").stdout)
    assert written["written"] == str(out) and yaml.safe_load(out.read_text()) == written["card"]
    assert written["notes"] == [
        "id 'tiny-llama' differs from the file stem 'other-name'; modelcards/ needs them equal"
    ]
    one_error_line(CliRunner().invoke(app, ["models", "import", str(tmp_path / "nowhere"), "--json"]), 2, "")
