"""Input files a first-hour review (h4, items 8, 9, 12) found read wrongly: a CSV header naming a column
twice or a row longer than its header (read silently: the last cell won, extra cells dropped), a UTF-8
byte-order mark at the start of a CSV, config.json or YAML (refused as part of the first name), and an MTP
layer count far past the model's layers (imported; the plan then blamed the deployment). Each test failed
before the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner import catalog, csvfiles, readers
from planner.errors import DataFileError
from planner.importers import benchpoints, hfimport
from planner.sim import workload
from tests.helpers import kvplan, write_csv
from tests.test_hfimport import DEEPSEEK_V3, QWEN3_0_6B

HEADER = "model,card,dtype,kv_dtype,tp,batch,ctx,per_user_tokens_per_s"
ROWS = ("qwen3-27b,ascend-950pr,fp8,bf16,1,1,384,15.8", "qwen3-27b,ascend-950pr,fp8,bf16,1,8,384,11")
BOM = "\ufeff"
BENCH_RESULTS = Path(__file__).resolve().parent / "fixtures" / "bench_results"


def test_a_header_naming_a_column_twice_is_refused_with_the_column_and_line(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "dup.csv", HEADER + ",model\n", *(f"{row},other" for row in ROWS))
    with pytest.raises(DataFileError) as error:
        benchpoints.read_bench_rows(path)
    assert str(error.value).startswith(f"{path}:1: header: column model given twice")
    result = kvplan("validate", path, code=2)
    assert "column model given twice" in result.output
    spaced = write_csv(tmp_path / "spaced.csv", HEADER + ", tp\n", *(f"{row},1" for row in ROWS))
    assert "column tp given twice" in kvplan("validate", spaced, code=2).output


def test_a_row_longer_than_the_header_is_refused_naming_file_line_and_counts(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "long.csv", HEADER + "\n", ROWS[0], ROWS[1] + ",1,2")
    with pytest.raises(DataFileError) as error:
        benchpoints.read_bench_rows(path)
    assert str(error.value) == f"{path}:3: row too long (got 10 fields, expected 8, the header's columns)"
    assert "row too long (got 10 fields, expected 8" in kvplan("validate", path, code=2).output


def test_empty_fields_past_the_header_are_a_spreadsheets_trailing_commas_and_read(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "trailing.csv", HEADER + "\n", *(row + ",," for row in ROWS))
    steps, _ = benchpoints.read_bench_rows(path)
    assert [p.batch for p in steps] == [1, 8]


def test_a_trace_header_naming_a_column_twice_or_a_long_row_is_refused(tmp_path: Path) -> None:
    dup = write_csv(tmp_path / "dup.csv", "arrival_s,input_tokens,output_tokens,input_tokens\n", "0,10,10,5")
    with pytest.raises(DataFileError, match=r"dup.csv:1: header: column input_tokens given twice"):
        workload.read_trace(dup)
    long = write_csv(tmp_path / "long.csv", "arrival_s,input_tokens,output_tokens\n", "0,10,10", "1,10,10,7")
    with pytest.raises(DataFileError, match=r"long.csv:3: row too long \(got 4 fields, expected 3"):
        workload.read_trace(long)


def test_the_shared_reader_leaves_headerless_tables_alone() -> None:
    """genai-perf's export holds several tables of different widths: no header bounds it."""
    rows = list(csvfiles.csv_reader(["Metric,avg", "a,1,2,3", "x,x"], where="f.csv"))
    assert rows == [["Metric", "avg"], ["a", "1", "2", "3"], ["x", "x"]]


def test_a_byte_order_mark_before_a_bench_csv_header_is_dropped(tmp_path: Path) -> None:
    plain = write_csv(tmp_path / "plain.csv", HEADER + "\n", *ROWS)
    marked = write_csv(tmp_path / "bom.csv", BOM + HEADER + "\n", *ROWS)
    assert [replace_where(p) for p in benchpoints.read_bench_points(marked)] == [
        replace_where(p) for p in benchpoints.read_bench_points(plain)
    ]
    assert "MAPE" in kvplan("validate", marked).output


def replace_where(point: benchpoints.BenchPoint) -> tuple[object, ...]:
    return (point.model, point.card, point.batch, point.ctx_tokens, point.decode_step_s)


def test_a_byte_order_mark_before_a_trace_header_is_dropped(tmp_path: Path) -> None:
    trace = write_csv(
        tmp_path / "t.csv", BOM + "arrival_s,input_tokens,output_tokens\n", "0,10,20", "1,30,40"
    )
    assert workload.read_trace(trace).input_tokens.tolist() == [10, 30]


def test_a_byte_order_mark_before_config_json_or_a_card_yaml_is_dropped(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    root.mkdir()
    (root / "config.json").write_text(BOM + json.dumps(QWEN3_0_6B), encoding="utf-8")
    assert hfimport.read_config(root / "config.json")["num_hidden_layers"] == 28
    out = tmp_path / "t.yaml"
    assert "wrote" in kvplan("models import", root, "--id", "t", "--out", out).output
    marked = tmp_path / "marked.yaml"
    marked.write_text(BOM + out.read_text(encoding="utf-8"), encoding="utf-8")
    assert catalog.resolve_model(str(marked))[0].num_hidden_layers == 28
    assert readers.parse_json(BOM + "{}", where="x") == {}


@pytest.mark.parametrize("field", ["num_nextn_predict_layers", "first_k_dense_replace"])
def test_models_import_refuses_layer_counts_past_the_models_layers(tmp_path: Path, field: str) -> None:
    root = tmp_path / "ckpt"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({**DEEPSEEK_V3, field: 1000}), encoding="utf-8")
    result = kvplan("models import", root, "--id", "t", "--out", tmp_path / "t.yaml", code=2)
    assert f"{field} must be <= num_hidden_layers (got 1000, expected <= 61)" in result.output
    assert not (tmp_path / "t.yaml").exists()


@pytest.mark.parametrize(
    ("card_id", "field"), [("qwen3.5-27b", "mtp_num_hidden_layers"), ("deepseek-v4-flash", "num_hash_layers")]
)
def test_a_card_yaml_with_a_layer_count_past_its_layers_is_refused(card_id: str, field: str) -> None:
    card = catalog.resolve_model(card_id)[0]
    with pytest.raises(ValueError, match=f"{field} must be <= num_hidden_layers"):
        type(card).model_validate({**card.model_dump(), field: card.num_hidden_layers + 1})


def test_genai_perf_export_refuses_a_repeated_metric_or_column() -> None:
    """genai-perf's tables: a metric given twice in one table, or a header naming a column twice, is one
    line naming it (the first or the last would win silently)."""
    from planner.importers import genaiperf

    text = (BENCH_RESULTS / "genai_perf_profile_export_genai_perf.csv").read_text()
    assert genaiperf.tables(text, where="gp.csv")[0]["time to first token"] == "245.10"
    lines = text.splitlines()
    twice = "\n".join([*lines[:2], lines[1].replace("245.10", "999.00"), *lines[2:]])
    with pytest.raises(DataFileError, match=r"gp\.csv:3: Time To First Token \(ms\): given twice"):
        genaiperf.tables(twice, where="gp.csv")
    header = "\n".join(["Metric,avg,avg", *lines[1:]])
    with pytest.raises(DataFileError, match="column avg given twice"):
        genaiperf.tables(header, where="gp.csv")


def test_aisbench_csv_refuses_a_metric_given_twice_in_one_stage() -> None:
    from planner.importers import aisbench

    text = (BENCH_RESULTS / "aisbench" / "gsm8kdataset.csv").read_text()
    assert aisbench.csv_averages(text, where="a.csv")["TTFT"] == "1461.383 ms"
    lines = text.splitlines()
    ttft = next(i for i, line in enumerate(lines) if line.startswith("TTFT,total"))
    twice = "\n".join([*lines[: ttft + 1], lines[ttft].replace("1461.383", "9.0"), *lines[ttft + 1 :]])
    with pytest.raises(DataFileError, match=rf"a\.csv:{ttft + 2}: TTFT \(total\): given twice"):
        aisbench.csv_averages(twice, where="a.csv")
