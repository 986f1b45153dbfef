"""kvplan's MindIE plan against public MindIE start-up logs (lab/published/mindie-logs.csv).

For each row: kvplan's non-KV memory (weights + activation + runtime, bytes per device) against the logged
warm-up figure (older releases: "After Decode warmup, peak mem: P G" = total - free with one KV block held;
master: "Total non KV cache memory"), and kvplan's npuBlockNum against the logged one. Where no npuBlockNum
is logged, MindIE's own rule is applied to the logged figures instead ("derived", at the row's fraction):
num_npu_blocks = floor((total x fraction - peak) / block bytes) + 1 (MindIE-LLM @40fb063 generator.py
warm-up: the held warm-up block counted back), npuBlockNum = num_npu_blocks - 1 (- 1 more with DP).
kvplan's prediction is planned on the logged total (--memory-gib). Errors: (kvplan - logged) / logged.

Usage: python lab/accuracy/mindie_logs.py
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from pathlib import Path

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from planner import units  # noqa: E402
from planner.cli import app  # noqa: E402
from planner.engines.mindie.pool import reserved_blocks  # noqa: E402

CSV = ROOT / "lab" / "published" / "mindie-logs.csv"


def kvplan_json(row: dict[str, str], out_dir: Path) -> dict[str, dict[str, object]]:
    """`kvplan mindie --json` for the row's settings, planned on the logged device total."""
    args = [
        "mindie",
        "-m",
        str(ROOT / row["model_card"]),
        "--card",
        row["card"],
        "--dtype",
        row["weights_dtype"],
    ]
    args += ["--tp", row["world_size"], "--ctx", row["max_seq_len"], "--block-size", row["cache_block_size"]]
    args += ["--memory-fraction", row["npu_memory_fraction"], "--memory-gib", row["logged_total_gib"]]
    args += ["--max-prefill-tokens", row["max_prefill_tokens"], "--weights-path", "/weights", "--json"]
    args += ["-o", str(out_dir / f"{row['log_id']}.json"), "--force"]
    result = CliRunner().invoke(app, args)
    if result.exit_code:
        raise SystemExit(f"{row['log_id']}: kvplan failed: {result.output.strip()}")
    return json.loads(result.output)  # type: ignore[no-any-return]


def derived_blocks(row: dict[str, str], block_bytes: int) -> int:
    """npuBlockNum by MindIE's warm-up rule on the logged total and peak (see the module docstring)."""
    total = units.gib_to_bytes(float(row["logged_total_gib"]))
    peak = units.gib_to_bytes(float(row["logged_peak_non_kv_gib"]))
    allocated = int(total * float(row["npu_memory_fraction"]) - peak) // block_bytes + 1
    return allocated - reserved_blocks(dp=int(row["dp"]))


def evaluate(row: dict[str, str], out_dir: Path) -> dict[str, object]:
    """One row's predicted and logged (or derived) figures and errors."""
    data = kvplan_json(row, out_dir)
    mem, pred = data["plan"]["memory"], data["mindie"]["prediction"]
    non_kv = mem["weights_bytes"] + mem["activation_bytes"] + mem["runtime_bytes"]  # type: ignore[index]
    logged_non_kv = units.gib_to_bytes(float(row["logged_peak_non_kv_gib"]))
    logged = int(row["logged_npu_block_num"]) if row["logged_npu_block_num"] else None
    real = logged if logged is not None else derived_blocks(row, pred["block_bytes"])  # type: ignore[index]
    blocks = pred["npu_block_num"]  # type: ignore[index]
    return {
        "log_id": row["log_id"],
        "kvplan_non_kv_gib": units.bytes_to_gib(non_kv),
        "logged_non_kv_gib": units.bytes_to_gib(logged_non_kv),
        "non_kv_err": (non_kv - logged_non_kv) / logged_non_kv,
        "kvplan_blocks": blocks,
        "real_blocks": real,
        "blocks_kind": "logged" if logged is not None else f"derived (fraction {row['npu_memory_fraction']})",
        "blocks_err": (blocks - real) / real,
    }


def main(out_dir: Path) -> list[dict[str, object]]:
    """Print the table and the median / worst errors; return the rows."""
    with CSV.open(newline="") as handle:
        rows = [evaluate(row, out_dir) for row in csv.DictReader(handle)]
    for r in rows:
        print(
            f"{r['log_id']}: non-KV kvplan {r['kvplan_non_kv_gib']:.2f} vs logged "
            f"{r['logged_non_kv_gib']:.2f} GiB "
            f"({r['non_kv_err']:+.1%}); npuBlockNum kvplan {r['kvplan_blocks']} vs {r['blocks_kind']} "
            f"{r['real_blocks']} ({r['blocks_err']:+.1%})"
        )
    for key in ("non_kv_err", "blocks_err"):
        errs = [abs(float(r[key])) for r in rows]  # type: ignore[arg-type]
        print(f"{key}: median {statistics.median(errs):.1%}, worst {max(errs):.1%} over {len(errs)} rows")
    logged = sum(r["blocks_kind"] == "logged" for r in rows)
    print(f"rows with a logged npuBlockNum: {logged} of {len(rows)}")
    return rows


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp))
