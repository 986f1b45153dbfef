"""lab/accuracy/mindie_logs.py: the public MindIE log rows (lab/published/mindie-logs.csv) plan and compare.

No row logs npuBlockNum yet (the one public 300I Duo log's block line is cut off); the check is kvplan's
non-KV memory against the logged warm-up peak, and npuBlockNum against MindIE's rule on the logged figures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_every_row_plans_and_compares(tmp_path: Path) -> None:
    from lab.accuracy import mindie_logs as script

    rows = script.main(tmp_path)
    assert rows
    for row in rows:
        assert abs(float(row["non_kv_err"])) < 0.25  # type: ignore[arg-type]
        assert int(row["real_blocks"]) > 0  # type: ignore[call-overload]
