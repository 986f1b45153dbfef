"""Input files and messages a defect report (h53) found unclear, each test failing before its fix: a CSV
padded with NUL bytes or holding cut-off rows (blamed on an empty column), and `kvplan models import` on a
checkpoint whose index names shards that are not there."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner import csvfiles
from planner.errors import DataFileError
from planner.importers import benchpoints
from tests.helpers import kvplan, write_csv

MALFORMED = Path(__file__).resolve().parent / "fixtures" / "malformed_csv"


def test_a_csv_padded_with_nul_bytes_names_the_nul_and_its_line() -> None:
    """Was: "nul.csv:6: column card: empty" (Python 3.11's csv reads a NUL as text)."""
    path = MALFORMED / "nul.csv"
    with pytest.raises(DataFileError) as error:
        benchpoints.read_bench_rows(path)
    assert str(error.value).startswith(f"{path}: NUL byte at line 6 (expected CSV text")
    assert "NUL byte at line 6" in kvplan("validate", path, code=2).output


def test_a_cut_off_row_names_its_field_count_not_an_empty_column() -> None:
    """Was: "short.csv:2: column kv_dtype: empty" for a row of 5 of the header's 23 fields."""
    path = MALFORMED / "short.csv"
    with pytest.raises(DataFileError) as error:
        benchpoints.read_bench_rows(path)
    assert str(error.value).startswith(
        f"{path}:2: row has 5 of 23 fields (expected 23, one per header column"
    )
    assert "row has 5 of 23 fields" in kvplan("validate", path, code=2).output


def test_short_rows_pass_where_only_unnamed_columns_or_nothing_is_missing(tmp_path: Path) -> None:
    """Trailing commas in the header name no column; blank lines are skipped; headerless tables are free."""
    rows = list(csvfiles.csv_reader(["a,b,,", "1,2", "", "3,4,,"], where="f.csv", header=True))
    assert rows == [["a", "b", "", ""], ["1", "2"], [], ["3", "4", "", ""]]
    assert list(csvfiles.csv_reader(["a,b,c", "1"], where="f.csv")) == [["a", "b", "c"], ["1"]]
    with pytest.raises(DataFileError, match=r"^f.csv:2: row has 1 of 3 fields"):
        list(csvfiles.csv_reader(["a,b,c,,", "1"], where="f.csv", header=True))
    path = write_csv(tmp_path / "t.csv", "x,y,z\n", "1,2,3", "3")
    with pytest.raises(DataFileError, match=r"t.csv:3: row has 1 of 3 fields"):
        list(csvfiles.csv_dict_reader(path.read_text().splitlines(), where=str(path)))


def test_a_row_short_of_optional_trailing_cells_reads_them_empty(tmp_path: Path) -> None:
    """A bench CSV with a trailing notes column its rows leave off (no trailing comma) validated before the
    cut-off check and still does (review h58): at least half the named fields, the rest read as empty."""
    path = write_csv(
        tmp_path / "opt.csv",
        "model,card,dtype,kv_dtype,tp,batch,ctx,decode_step_s,notes\n",
        "qwen3-8b,ascend-910b3,bf16,bf16,1,8,4096,0.03",
    )
    rows = list(csvfiles.csv_dict_reader(path.read_text().splitlines(), where=str(path)))
    assert rows[0]["decode_step_s"] == "0.03" and not rows[0].get("notes")
    assert "MAPE" in kvplan("validate", path).output
