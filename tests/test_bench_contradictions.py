"""Benchmark data whose own figures contradict each other is refused or named, never used silently.

- `bench import`: a stated output rate against the file's tokens / duration (vLLM, AISBench) or mean output
  length x request rate (genai-perf) beyond servingresult.RATE_TOLERANCE_FRACTION refuses the file (exit 2).
- `validate`: TTFT and TPOT predicted vs measured where rows state them; a row whose tpot_s its throughput
  and concurrency rule out (importers/rowchecks.py) is named.
- `calibrate --from-bench`: a fit whose quality warning says "do not trust" writes nothing (exit 4) unless
  --accept-poor-fit; the microbenchmarks' flags are refused with a file the fit or the log reader reads.
- A group's --json given before its sub-command (`kvplan bench --json import ...`) reaches the sub-command.
Fixtures: tests/fixtures/bench_results/ (README there).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import DataFileError
from planner.importers import rowchecks, servingfiles
from planner.importers.benchpoints import read_bench_rows
from planner.importers.servingresult import RATE_TOLERANCE_FRACTION

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "tests" / "fixtures" / "bench_results"
VLLM = RESULTS / "vllm_bench_serve.json"
AIS_JSON = RESULTS / "aisbench" / "gsm8kdataset.json"
GENAI = RESULTS / "genai_perf_profile_export_genai_perf.csv"
MISMATCH = RESULTS / "contradictory" / "vllm_output_throughput_100x.json"
TPOT_MS = RESULTS / "contradictory" / "tpot_ms_in_seconds.csv"
SETUP = ["--card", "ascend-910b3", "--dtype", "int8", "--tp", "4"]


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def error_line(result: Result) -> str:
    """The one `kvplan: error:` line of a refused command (nothing else on stderr)."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvplan: error: "), result.output
    return lines[0]


def test_a_vllm_result_whose_throughput_contradicts_its_tokens_and_duration_is_refused() -> None:
    raw = json.loads(MISMATCH.read_text())
    result = invoke("bench", "import", MISMATCH, *SETUP)
    assert result.exit_code == 2 and result.stdout == ""
    line = error_line(result)
    expected = raw["total_output_tokens"] / raw["duration"]
    for part in (str(MISMATCH), "output_throughput", "86005", f"{expected:.6g}", "within 2 %"):
        assert part in line, line


@pytest.mark.parametrize(("factor", "refused"), [(1 + 0.9 * RATE_TOLERANCE_FRACTION, False),
                                                 (1 + 1.1 * RATE_TOLERANCE_FRACTION, True),
                                                 (1 - 1.1 * RATE_TOLERANCE_FRACTION, True)])  # fmt: skip
def test_the_vllm_rate_check_tolerates_rounding_only(tmp_path: Path, factor: float, refused: bool) -> None:
    raw = json.loads(VLLM.read_text())
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**raw, "output_throughput": raw["output_throughput"] * factor}))
    if refused:
        with pytest.raises(DataFileError, match="output_throughput: contradicts total_output_tokens"):
            servingfiles.read_serving_result(path)
    else:
        assert servingfiles.read_serving_result(path).output_tokens_per_s == pytest.approx(
            raw["output_throughput"] * factor
        )


def test_an_aisbench_result_is_checked_on_one_stage_whichever_spelling_it_uses(tmp_path: Path) -> None:
    raw = json.loads(AIS_JSON.read_text())
    renamed = {("Total Generated Tokens" if k == "Total generated tokens" else k): v for k, v in raw.items()}
    good = tmp_path / "good.json"
    good.write_text(json.dumps(renamed))  # AISBench's calculator spells it so: read, and checked
    assert servingfiles.read_serving_result(good).output_tokens == round(48000 / 32)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**renamed, "Output Token Throughput": {"total": "11954.4 token/s"}}))
    with pytest.raises(DataFileError, match=r"Output Token Throughput\.total: contradicts .* 40152\.7 ms"):
        servingfiles.read_serving_result(bad)


def test_a_genai_perf_export_whose_rates_disagree_with_its_mean_length_is_refused(tmp_path: Path) -> None:
    assert servingfiles.read_serving_result(GENAI, concurrency=16).output_tokens_per_s == 845.30
    bad = tmp_path / "export.csv"
    bad.write_text(GENAI.read_text().replace("(tokens/sec),845.30", "(tokens/sec),1690.60"))
    with pytest.raises(DataFileError, match=r"Output Sequence Length x Request Throughput = 511\.6 x 1\.65"):
        servingfiles.read_serving_result(bad, concurrency=16)


def test_validate_reports_ttft_and_tpot_and_names_a_tpot_typed_in_milliseconds() -> None:
    text = invoke("validate", TPOT_MS)
    assert text.exit_code == 0, text.output
    warnings = [line for line in text.stdout.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"{TPOT_MS}:3: tpot_s 63 s contradicts" in warnings[0]
    assert "TPOT MAPE" in text.stdout and "TTFT MAPE" in text.stdout
    assert f"worst -99.9 % at {TPOT_MS}:3" in text.stdout  # the TPOT row, not hidden by the tok/s MAPE
    found = json.loads(invoke("validate", TPOT_MS, "--json").stdout)
    rows = {row["where"].rsplit(":", 1)[1]: row for row in found["serving"]}
    assert rows["3"]["measured_tpot_s"] == 63 and rows["3"]["tpot_error_fraction"] < -0.99
    assert rows["3"]["tpot_warning"] == warnings[0].removeprefix("warning: ")
    assert rows["3"]["predicted_ttft_s"] == pytest.approx(0.41 * (1 + rows["3"]["ttft_error_fraction"]))
    assert rows["2"]["measured_tpot_s"] is None and rows["2"]["tpot_error_fraction"] is None
    stated = [abs(r["tpot_error_fraction"]) for r in rows.values() if r["tpot_error_fraction"] is not None]
    assert found["tpot_mape_fraction"] == pytest.approx(sum(stated) / len(stated))
    assert found["ttft_mape_fraction"] == pytest.approx(abs(rows["3"]["ttft_error_fraction"]))


def test_the_tpot_check_flags_no_row_of_a_consistent_file(tmp_path: Path) -> None:
    clean = tmp_path / "clean.csv"
    clean.write_text(TPOT_MS.read_text().replace(",0.41,63,", ",0.41,0.063,"))
    _, rows = read_bench_rows(clean)
    assert [rowchecks.tpot_warning(row) for row in rows] == [None] * 4
    assert rows[1].tpot_s is not None and rows[1].tpot_s < (rowchecks.tpot_ceiling_s(rows[1]) or 0) * 1.05
    assert not [line for line in invoke("validate", clean).stdout.splitlines() if line.startswith("warning")]


def test_calibrate_refuses_a_fit_that_says_do_not_trust_it(tmp_path: Path) -> None:
    out = tmp_path / "fit.yaml"
    refused = invoke("calibrate", "--from-bench", TPOT_MS, "--card", "ascend-950pr", "--out", out)
    assert refused.exit_code == 4 and not out.exists()
    line = error_line(refused)
    assert f"worst {TPOT_MS}:3 " in line and "nothing written" in line and "--accept-poor-fit" in line
    assert "do not trust predictions from this profile" in refused.stdout  # the report before the refusal
    as_json = invoke("calibrate", "--from-bench", TPOT_MS, "--card", "ascend-950pr", "--out", out, "--json")
    assert as_json.exit_code == 4 and as_json.stdout == "" and error_line(as_json) == line
    forced = invoke(
        "calibrate", "--from-bench", TPOT_MS, "--card", "ascend-950pr", "--out", out, "--accept-poor-fit"
    )
    assert forced.exit_code == 0 and out.exists() and "do not trust" in out.read_text()


def test_calibrate_writes_the_same_rows_without_the_unit_slip(tmp_path: Path) -> None:
    clean = tmp_path / "clean.csv"
    clean.write_text(TPOT_MS.read_text().replace(",0.41,63,", ",0.41,0.063,"))
    out = tmp_path / "fit.yaml"
    result = invoke("calibrate", "--from-bench", clean, "--card", "ascend-950pr", "--out", out)
    assert result.exit_code == 0 and out.exists(), result.output


@pytest.mark.parametrize(
    ("extra", "flag"),
    [(["--device", "npu:0"], "--device"), (["--raw", "raw.json"], "--raw"), (["--dry-run"], "--dry-run"),
     (["--check"], "--check")],
)  # fmt: skip
def test_calibrate_refuses_the_microbenchmarks_flags_with_a_file(extra: list[str], flag: str) -> None:
    for reader in ("--from-bench", "--from-log"):
        result = invoke("calibrate", reader, TPOT_MS, "--card", "ascend-950pr", *extra)
        assert result.exit_code == 2
        line = error_line(result)
        assert line.startswith(f"kvplan: error: {flag}: only the microbenchmarks") and reader in line, line


def test_accept_poor_fit_belongs_to_the_fit() -> None:
    result = invoke("calibrate", "--card", "ascend-950pr", "--accept-poor-fit")
    assert result.exit_code == 2 and "--accept-poor-fit: only a --from-bench fit" in error_line(result)


def test_a_groups_json_before_its_subcommand_reaches_it(tmp_path: Path) -> None:
    from tests.test_hfimport import tiny_llama_checkpoint

    after = invoke("bench", "import", VLLM, *SETUP, "--json")
    before = invoke("bench", "--json", "import", VLLM, *SETUP)
    assert before.exit_code == after.exit_code == 0 and before.stdout == after.stdout
    assert json.loads(before.stdout)["rows"][0]["output_tokens_per_s"] == 860.05
    root = tiny_llama_checkpoint(tmp_path / "Tiny-Llama")
    after = invoke("models", "import", root, "--json")
    before = invoke("models", "--json", "import", root)
    assert before.exit_code == 0 and before.stdout == after.stdout and json.loads(before.stdout)["card"]
    missing = invoke("models", "--json", "import", tmp_path / "nowhere")
    assert missing.exit_code == 2 and missing.stdout == "" and error_line(missing)


@pytest.mark.lab
def test_no_shipped_fit_row_trips_the_tpot_check() -> None:
    for path in sorted((ROOT / "lab" / "published" / "fit-rows").glob("*.csv")):
        _, rows = read_bench_rows(path)
        assert [rowchecks.tpot_warning(row) for row in rows if rowchecks.tpot_warning(row)] == [], path
