"""Pooled single-request TTFT from run 6's probe files (lab/harness/ref_ttft_probe.py), CPU only.

    python3 -m lab.harness.ttft_pool [FOLDER]      # default lab/runs/h200-run6/probe

Every rep of every process (7 processes on two H200 machines for Qwen3.5-0.8B) is one sample of wall time;
per (model, prompt tokens): median, 10th and 90th percentile, sample and process counts, and each process's
median with its host-speed index (pure-Python loop ns per step, us per eager 1-element launch) so the spread
can be read against the host. Rows of a `--pre` warm-up (pre_rows) are not pooled.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROBES = ROOT / "lab" / "runs" / "h200-run6" / "probe"


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted values (q in 0..1)."""
    return values[min(len(values) - 1, int(q * len(values)))]


def pooled(folder: Path = PROBES) -> dict[tuple[str, int], dict[str, Any]]:
    """(model, prompt tokens) -> median_s, p10_s, p90_s, min_s, max_s, samples, processes, per_process."""
    groups: dict[tuple[str, int], list[tuple[str, list[float], dict[str, float]]]] = {}
    for path in sorted(folder.glob("*.json")):
        probe = json.loads(path.read_text(encoding="utf-8"))
        for row in probe["rows"]:
            walls = [s["wall_s"] for s in row["samples"]]
            key = (row["model"], int(row["prompt_tokens"]))
            groups.setdefault(key, []).append((path.stem, walls, probe["host_index_start"]))
    out = {}
    for key, runs in sorted(groups.items()):
        walls = sorted(w for _, ws, _ in runs for w in ws)
        out[key] = {
            "median_s": statistics.median(walls),
            "p10_s": _percentile(walls, 0.1),
            "p90_s": _percentile(walls, 0.9),
            "min_s": walls[0],
            "max_s": walls[-1],
            "samples": len(walls),
            "processes": len(runs),
            "per_process": [
                {"probe": name, "median_s": statistics.median(ws), **host} for name, ws, host in runs
            ],
        }
    return out


def main() -> None:
    """Print the pooled table."""
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else PROBES
    print("| model | prompt | n (processes) | median ms | p10 - p90 ms | min - max ms | process medians ms |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for (model, prompt), row in pooled(folder).items():
        per = ", ".join(f"{p['median_s'] * 1e3:.1f}" for p in row["per_process"])
        print(
            f"| {model} | {prompt} | {row['samples']} ({row['processes']}) | {row['median_s'] * 1e3:.1f} | "
            f"{row['p10_s'] * 1e3:.1f} - {row['p90_s'] * 1e3:.1f} | {row['min_s'] * 1e3:.1f} - "
            f"{row['max_s'] * 1e3:.1f} | {per} |"
        )


if __name__ == "__main__":
    main()
