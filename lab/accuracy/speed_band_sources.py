"""Recompute the measured speed-range factors in planner/perf/ranges.py from the repo's data (CPU, ~2 s).

    python lab/accuracy/speed_band_sources.py

A factor is truth / estimate on a throughput (tok/s, 1 / step time, 1 / TTFT); a band [low, high] says
where the truth lay against the estimate. Statistic: on the H200 sets (one lab harness, every point a
held-out measurement) the observed range, minimum to maximum; on the published Ascend rows (many sources,
engines and set-ups, a few of which kvplan predicts but does not describe: e.g. GPUStack's burst runs of
1000 prompts sent at once, 0.06x-0.12x) their central ranges.ASCEND_CENTRAL_FRACTION (numpy percentiles
5 and 95), so one odd row does not set the range. Each is rounded outward to 2 decimals and widened to
contain 1 (the estimate itself).

Bands and the points they come from (every prediction with the card's datasheet peaks x assumed efficiencies,
the `measured` block removed, unless the band says microbenchmarks):
  ascend_decode   Ascend, uncalibrated: every row of lab/published/ascend-serving.csv that
                  lab/published/predict.py can predict (its own row filter), output tok/s. CI rows are
                  floors (a run passes at >= 0.97 x its baseline), so there truth >= about the floor.
  ascend_ttft     Ascend prefill, uncalibrated: the corpus rows kvplan models that publish a TTFT at one
                  client (no queueing), too few to stand alone: ascend_decode widened to contain them. Rows of
                  newer features (newer_feature: SGLang, seed 002's torch_npu server) are held out as for
                  ascend_decode and printed on their own.
  gpu_decode      NVIDIA, uncalibrated: every held-out H200 end-to-end decode point (runs 1 and 5, tp = 2 of
                  run 4; lab/runs; run 5's variant_decode.csv only its flash rows), predicted as
                  lab/accuracy/accuracy_table.py predicts them.
  gpu_ttft        NVIDIA prefill, uncalibrated: the held-out H200 TTFTs of ACCURACY.md "Prefill (TTFT)" (run
                  5 prefill.json, Qwen3.5-0.8B from run 6's pooled probes). Both GPU sets ran transformers
                  in CUDA graphs (`--engine transformers`), not a serving engine.
  microbench_decode  NVIDIA decode, microbenchmark profile (hwprofiles/nvidia-h200.yaml as shipped): the same
                  190 points, each set with the profile variant accuracy_table.py predicts it with (runs 1
                  and 4 flash-forced: the single flash table; run 5's flash rows: its flash table).
  microbench_ttft NVIDIA prefill, microbenchmark profile (hwprofiles/nvidia-h200.yaml as shipped): the same
                  TTFTs; its prefill tables time transformers only.
  microbench_ttft_untabled   the same without the prefill tables: what every other engine gets.
"""

from __future__ import annotations

import csv
import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lab.accuracy import accuracy_table  # noqa: E402
from lab.published import predict  # noqa: E402
from planner import catalog  # noqa: E402
from planner.fit import solver  # noqa: E402
from planner.importers import benchpoints  # noqa: E402
from planner.perf import ranges, roofline  # noqa: E402
from planner.schema import HardwareProfile  # noqa: E402

DATA = ROOT / "lab" / "runs"
DECODE_POINT_FILES = (DATA / "h200-e2e-decode.csv", DATA / "h200-e2e-decode-tp2-x2.csv")  # runs 1 and 4
RUN5_DECODE = (("dense_decode.csv", None), ("hybrid_decode.csv", None), ("variant_decode.csv", "flash"))


def datasheet_only(card_id: str) -> HardwareProfile:
    """The card's profile without its measured block: what an uncalibrated card plans with."""
    return catalog.load_card(card_id).model_copy(update={"measured": None})


def newer_feature(row: dict[str, str]) -> bool:
    """A row predictable only since 2026-12-05's features (a separate draft model, a cached shared prefix,
    DeepSeek sparse attention, a P:D fleet) or 2026-12-06's SGLang engine, seed 002's torch_npu server (as
    --engine transformers), GLM-5.x (DeepSeek sparse attention too), MiniMax-M3 (MiniMax sparse attention),
    2026-12-06's DeepSeek-V4 (compressed sparse attention) and the CloudMatrix384 paper's decode instance
    (predict.CLOUDMATRIX_DECODE): held out of the band until
    their own spread is reviewed (ascend_decode_ratios(newer=True) prints it; docs/accuracy.md states it)."""
    return bool(
        predict.draft_method(row)
        or predict.shares_prefix(row)
        or row["model"].startswith(
            (
                predict.SPARSE_ATTENTION_MODEL,
                predict.GLM5_MODEL,
                "MiniMaxAI/MiniMax-M3",
                predict.DEEPSEEK_V4_MODEL,
            )
        )
        or predict.is_disaggregated(row)
        or row["engine"] in ("sglang", predict.SEED_002_ENGINE, predict.CLOUDMATRIX_ENGINE)
    )


def ascend_decode_ratios(*, newer: bool = False) -> list[float]:
    """Published / predicted output tok/s of every closed-loop corpus row predict.py predicts, datasheet
    profiles, without (newer=False) or only (newer=True) the rows of newer features (newer_feature); the
    held-out rows (predict.HELD_OUT) never set the band.
    Open-loop rows (request_rate) are left out: a steady open-loop run's output tok/s is its
    arrival rate x output tokens whatever the engine's speed, so their ratio says nothing about speed."""
    with predict.CORPUS.open(encoding="utf-8") as handle:
        corpus = list(csv.DictReader(handle))
    with tempfile.TemporaryDirectory() as folder:
        for card in sorted({row["card"] for row in corpus if row["card"] in catalog.card_ids()}):
            profile = datasheet_only(card).model_dump(mode="json")
            (Path(folder) / f"{card}.yaml").write_text(yaml.safe_dump(profile), encoding="utf-8")
        rows = [
            predict.predict_row(i, row, profile_dir=Path(folder)) for i, row in enumerate(corpus, start=2)
        ]
    closed = [
        r
        for r, c in zip(rows, corpus, strict=True)
        if predict.open_loop_rate(c) is None
        and newer_feature(c) == newer
        and predict.HELD_OUT not in c["notes"]
    ]
    return [1.0 / (1.0 + float(row["error"])) for row in closed if row["status"] == "predicted"]


def ascend_ttft_ratios(*, newer: bool = False) -> list[float]:
    """Published / predicted TTFT rate of the one-client corpus rows kvplan models (datasheet profiles),
    without (newer=False) or only (newer=True) the rows of newer features, as ascend_decode_ratios."""
    from planner.fit import serving_rows
    from planner.importers.benchpoints import parse_serving_row

    ratios = []
    with predict.CORPUS.open(encoding="utf-8") as handle:
        for i, row in enumerate(csv.DictReader(handle), start=2):
            if row["concurrency"] != "1" or not row["ttft_s"] or predict._skip_reason(row) is not None:
                continue
            if predict.HELD_OUT in row["notes"]:  # predicted against, never a source of the band
                continue
            if newer_feature(row) != newer:
                continue
            point = parse_serving_row(predict.bench_row(row), where=f"{predict.CORPUS.name}:{i}")
            dep = serving_rows.serving_deployment(point, hardware=datasheet_only(row["card"]))
            predicted = roofline.ttft_s(dep, prompt_tokens=point.input_tokens)
            ratios.append(predicted / float(row["ttft_s"]))
    return ratios


def gpu_decode_ratios() -> list[float]:
    """Predicted / measured decode step (= truth / estimate of tok/s) of every held-out H200 e2e point."""
    points = [p for path in DECODE_POINT_FILES for p in benchpoints.read_bench_points(path)]
    # run 5 as accuracy_table reads it: variant_decode.csv's flash-forced rows only (its other rows force
    # SDPA's math / efficient backends, which no serving engine runs)
    points += [p for name, backend in RUN5_DECODE for p in accuracy_table._run5_points(name, backend)]
    ratios = [1.0 + e for e in solver.prediction_errors(points, calibrated=False)]
    return ratios


def microbench_decode_ratios() -> list[float]:
    """Predicted / measured decode step of the same points with the shipped (microbenchmark) H200 profile."""
    points = [p for path in DECODE_POINT_FILES for p in benchpoints.read_bench_points(path)]
    ratios = [
        1.0 + e for e in solver.prediction_errors(points, hardware=accuracy_table.FLASH_HW, calibrated=True)
    ]
    for name, backend in RUN5_DECODE:
        hardware = accuracy_table.RUN5_FLASH_HW if backend == "flash" else None
        run5 = accuracy_table._run5_points(name, backend)
        ratios += [1.0 + e for e in solver.prediction_errors(run5, hardware=hardware, calibrated=True)]
    return ratios


def ttft_ratios(hardware: HardwareProfile) -> list[float]:
    """Predicted / measured TTFT of the held-out H200 prefill points (accuracy_table's rows) on `hardware`."""
    import json

    raw = json.loads((accuracy_table.RUN5 / "prefill.json").read_text())
    pool = accuracy_table.ttft_pool.pooled()
    ratios = []
    for row in raw["ttft_3reps_call3"]:
        model, prompt = row["model"], row["prompt_tokens"]
        measured = pool[(model, prompt)]["median_s"] if model in accuracy_table.RUN6_TTFT else row["ttft_s"]
        dep = accuracy_table._prefill_deployment(model, prompt, hardware)
        ratios.append(roofline.ttft_s(dep, prompt_tokens=prompt) / measured)
    return ratios


def untabled_h200() -> HardwareProfile:
    """The shipped H200 profile without its prefill tables (accuracy_table's "before" column)."""
    return accuracy_table._with_coefficients(
        catalog.load_card("nvidia-h200"),
        gemm_efficiency_table=None,
        prefill_attention_table=None,
        prefill_layer_table=None,
    )


def joined(pair: tuple[float, float], ratios: list[float]) -> tuple[float, float]:
    """The pair widened to contain every ratio (rounded outward to 2 decimals)."""
    return min(pair[0], math.floor(min(ratios) * 100) / 100), max(pair[1], math.ceil(max(ratios) * 100) / 100)


band = ranges.central_band


def factors() -> dict[str, tuple[float, float]]:
    """Every measured band of ranges.py, by name (module docstring)."""
    ascend_decode = band(ascend_decode_ratios(), central=ranges.ASCEND_CENTRAL_FRACTION)
    return {
        "ascend_decode": ascend_decode,
        "ascend_ttft": joined(ascend_decode, ascend_ttft_ratios()),
        "gpu_decode": band(gpu_decode_ratios()),
        "gpu_ttft": band(ttft_ratios(datasheet_only("nvidia-h200"))),
        "microbench_decode": band(microbench_decode_ratios()),
        "microbench_ttft": band(ttft_ratios(catalog.load_card("nvidia-h200"))),
        "microbench_ttft_untabled": band(ttft_ratios(untabled_h200())),
    }


def main() -> None:
    sources = {
        "ascend_decode": ascend_decode_ratios(),
        "ascend_decode of newer features (not in the band)": ascend_decode_ratios(newer=True),
        "ascend_ttft (one-client rows only)": ascend_ttft_ratios(),
        "ascend_ttft of newer features (not in the band)": ascend_ttft_ratios(newer=True),
        "gpu_decode": gpu_decode_ratios(),
        "gpu_ttft": ttft_ratios(datasheet_only("nvidia-h200")),
        "microbench_decode": microbench_decode_ratios(),
        "microbench_ttft": ttft_ratios(catalog.load_card("nvidia-h200")),
        "microbench_ttft_untabled": ttft_ratios(untabled_h200()),
    }
    print("truth / estimate of a throughput (tok/s, 1 / step, 1 / TTFT)\n")
    print("| band | points | min | P5 | median | P95 | max |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, ratios in sources.items():
        p5, median, p95 = np.percentile(ratios, [5, 50, 95])
        print(
            f"| {name} | {len(ratios)} | {min(ratios):.3f} | {p5:.3f} | {median:.3f} | {p95:.3f} | "
            f"{max(ratios):.3f} |"
        )
    print()
    for name, (low, high) in factors().items():
        print(f"{name}: low {low:.2f}, high {high:.2f}")


if __name__ == "__main__":
    main()
