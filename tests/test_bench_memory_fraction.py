"""A serving bench row may state the engine's memory share (column memory_fraction: vLLM's
--gpu-memory-utilization, MindIE's NPU_MEMORY_FRACTION); the row's deployment then plans at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.errors import DataFileError, KvplanError
from planner.fit import prepared
from planner.importers.benchpoints import read_bench_rows
from tests.helpers import write_csv

HEADER = (
    "model,card,dtype,kv_dtype,tp,engine,concurrency,input_tokens,output_tokens,output_tokens_per_s,"
    "memory_gib,memory_fraction\n"
)
# Qwen3.5-27B in fp16 on a 64 GiB card: ~54 GiB of weights, activation and runtime
ROW = "qwen3.5-27b,ascend-950pr,fp16,bf16,1,mindie,1,256,128,11.2,64"


def test_memory_fraction_column_is_read_and_checked(tmp_path: Path) -> None:
    _, (stated, default) = read_bench_rows(write_csv(tmp_path / "rows.csv", HEADER, f"{ROW},0.95", f"{ROW},"))
    assert (stated.memory_fraction, default.memory_fraction) == (0.95, None)
    for bad in ("1.5", "0", "-0.2", "x"):
        with pytest.raises(DataFileError, match="memory_fraction"):
            read_bench_rows(write_csv(tmp_path / "bad.csv", HEADER, f"{ROW},{bad}"))


def test_a_stated_fraction_is_what_the_row_plans_at(tmp_path: Path) -> None:
    """At the default 0.8 of 64 GiB the fp16 weights do not fit; at the 0.95 the row states they do."""
    _, (stated, default) = read_bench_rows(write_csv(tmp_path / "rows.csv", HEADER, f"{ROW},0.95", f"{ROW},"))
    with pytest.raises(KvplanError, match="does not fit"):
        prepared.prepare([default])
    (row,) = prepared.prepare([stated])
    assert row.deployment.memory_fraction == 0.95
    assert row.run.max_batch >= 1
