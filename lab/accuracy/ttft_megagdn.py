"""Held-out check of the Ascend prefill model: megagdn-pto's measured single-prompt TTFTs (CPU, a few s).

    PYTHONPATH=. python lab/accuracy/ttft_megagdn.py

Rows: lab/published/megagdn-ttft.csv (README there): one prompt at a time on one Ascend 910B2,
vllm-ascend eager mode with its stock Triton GDN kernels, max_tokens = 1, the whole prompt in one pass.
No profile was fitted to these TTFTs; the chunked-GDN rate was timed on the same repository's kernel bench.
One choice rests on them: the 910B / 910C compute_fraction_prior_factor (so the fitted column is not held
out).

Each predictable row is predicted as `kvplan serve -m <model> --card <card> --dtype <dtype> --tp 1
--engine vllm --input-tokens S --output-tokens 1 --concurrency 1 --max-prefill-tokens S+257 --json` does
(estimate.ttft_s; the same planner calls, no subprocess), under three profiles:
  datasheet       the row's card as shipped (hwprofiles/ascend-910b2.yaml: datasheet peaks x assumed
                  efficiencies, chunked_gdn_ns_per_head_token measured)
  no-chunked-gdn  the same card with chunked_gdn_ns_per_head_token = None (the model before that field:
                  gdn.update's FLOP at compute_fraction)
  fitted-910b3    hwprofiles/fitted/ascend-910b3.vllm.yaml loaded by path (the A2 profile fitted to published
                  serving rows; its datasheet is the 910B3's, 313 vs 376 TFLOP/s bf16)
Error = predicted / measured - 1. Rows whose model has no kvplan card are listed, not predicted.

Last table: per model, the marginal prefill time per prompt token between its two longest prompts,
(TTFT(S2) - TTFT(S1)) / (S2 - S1), measured and predicted. A fixed per-request cost (request handling, eager
kernel launches), which the measured TTFT carries and the model may lack, cancels in that difference.
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from planner import catalog, inputs  # noqa: E402
from planner.cli.perf import serve_results  # noqa: E402
from planner.deployment import Deployment  # noqa: E402
from planner.errors import KvplanError  # noqa: E402
from planner.serving.closed_loop import BenchRun  # noqa: E402

CSV_PATH = ROOT / "lab" / "published" / "megagdn-ttft.csv"
FITTED_A2_PROFILE = ROOT / "hwprofiles" / "fitted" / "ascend-910b3.vllm.yaml"
PROFILES = ("datasheet", "no-chunked-gdn", "fitted-910b3")
# benchmark_prefill.py: max_num_batched_tokens = prompt + max_tokens (1) + 256, so one pass holds the prompt
PREFILL_HEADROOM_TOKENS = 257
OUTPUT_TOKENS = 1  # the harness's max_tokens: TTFT is the whole request
LONG_PROMPT_TOKENS = 4096  # below this the measured TTFT is mostly fixed per-request cost (README there)


def read_rows(path: Path = CSV_PATH) -> list[dict[str, str]]:
    """The CSV's rows as written."""
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def skip_reason(row: dict[str, str]) -> str | None:
    """Why kvplan cannot predict this row (no model card for its HF id), or None."""
    try:
        catalog.resolve_model(row["model"])
    except KvplanError:
        return f"no kvplan model card for {row['model']}"
    return None


def without_chunked_gdn(dep: Deployment) -> Deployment:
    """`dep` with chunked_gdn_ns_per_head_token = None in the coefficients it is timed with."""
    hw = dep.hardware
    if hw.measured is not None and dep.calibrated:
        coeff = hw.measured.coefficients.model_copy(update={"chunked_gdn_ns_per_head_token": None})
        hw = hw.model_copy(update={"measured": hw.measured.model_copy(update={"coefficients": coeff})})
    else:
        coeff = hw.default_coefficients.model_copy(update={"chunked_gdn_ns_per_head_token": None})
        hw = hw.model_copy(update={"default_coefficients": coeff})
    return dep.model_copy(update={"hardware": hw})


def deployment(row: dict[str, str], *, profile: str) -> Deployment:
    """The Deployment `kvplan serve` builds for this row under `profile` (module docstring)."""
    if profile not in PROFILES:
        raise ValueError(f"profile: unknown (got {profile!r}, expected one of {', '.join(PROFILES)})")
    prompt_tokens = int(row["prompt_tokens"])
    request = inputs.PlanRequest(
        model=row["model"],
        card=str(FITTED_A2_PROFILE) if profile == "fitted-910b3" else row["card"],
        dtype=row["dtype"],
        tp=int(row["tp"]),
        ctx=str(prompt_tokens + OUTPUT_TOKENS),
        max_prefill_tokens=prompt_tokens + PREFILL_HEADROOM_TOKENS,
        engine=row["engine"],
    )
    dep = inputs.to_deployment(request)
    return without_chunked_gdn(dep) if profile == "no-chunked-gdn" else dep


def predicted_ttft_s(row: dict[str, str], *, profile: str) -> float:
    """kvplan's TTFT for the row's single prompt (estimate.ttft_s of `kvplan serve --concurrency 1`)."""
    _, estimate = serve_results(
        deployment(row, profile=profile),
        prompt_tokens=int(row["prompt_tokens"]),
        output_tokens=OUTPUT_TOKENS,
        concurrency=1,
        slos=(None, None, None),
        run=BenchRun(),
    )
    return estimate.ttft_s


def error_fraction(predicted_s: float, measured_s: float) -> float:
    """Signed error: predicted / measured - 1."""
    return predicted_s / measured_s - 1


def median_abs_error(errors: Iterable[float]) -> float:
    """Median of |error| (NaN when there is none)."""
    values = [abs(e) for e in errors]
    return statistics.median(values) if values else float("nan")


def predictions(rows: list[dict[str, str]]) -> list[tuple[dict[str, str], dict[str, float]]]:
    """(row, {profile: predicted TTFT s}) for every predictable row."""
    return [
        (row, {p: predicted_ttft_s(row, profile=p) for p in PROFILES})
        for row in rows
        if skip_reason(row) is None
    ]


def table_lines(predicted: list[tuple[dict[str, str], dict[str, float]]]) -> list[str]:
    """Markdown table: measured and predicted TTFT (ms) with signed % errors per profile."""
    head = "| model | prompt tokens | measured ms | " + " | ".join(f"{p} ms (err)" for p in PROFILES) + " |"
    lines = [head, "|" + "---|" * (3 + len(PROFILES))]
    for row, by_profile in predicted:
        measured_s = float(row["ttft_s"])
        cells = [
            f"{by_profile[p] * 1e3:.0f} ({error_fraction(by_profile[p], measured_s):+.1%})" for p in PROFILES
        ]
        lines.append(
            f"| {row['model']} | {row['prompt_tokens']} | {measured_s * 1e3:.0f} | "
            + " | ".join(cells)
            + " |"
        )
    return lines


def summary_lines(predicted: list[tuple[dict[str, str], dict[str, float]]]) -> list[str]:
    """Per profile, median |error| over prompts >= LONG_PROMPT_TOKENS and over all predicted rows."""
    lines = [
        f"| profile | median abs error, prompt >= {LONG_PROMPT_TOKENS} | median abs error, all rows |",
        "|---|---|---|",
    ]
    for p in PROFILES:
        errors = [(int(r["prompt_tokens"]), error_fraction(t[p], float(r["ttft_s"]))) for r, t in predicted]
        long_rows = median_abs_error(e for n, e in errors if n >= LONG_PROMPT_TOKENS)
        lines.append(f"| {p} | {long_rows:.1%} | {median_abs_error(e for _, e in errors):.1%} |")
    return lines


def marginal_s_per_token(points: list[tuple[int, float]]) -> float:
    """Formula: (t2 - t1) / (S2 - S1) over the two longest prompts S1 < S2 with TTFTs t1, t2 (s per token)."""
    (s1, t1), (s2, t2) = sorted(points)[-2:]
    return (t2 - t1) / (s2 - s1)


def marginal_lines(predicted: list[tuple[dict[str, str], dict[str, float]]]) -> list[str]:
    """Markdown table: per model, marginal_s_per_token measured and per profile (us per token, % error)."""
    lines = ["| model | measured us/token | " + " | ".join(f"{p} us/token (err)" for p in PROFILES) + " |"]
    lines.append("|" + "---|" * (2 + len(PROFILES)))
    for model in dict.fromkeys(row["model"] for row, _ in predicted):
        mine = [(int(r["prompt_tokens"]), r, t) for r, t in predicted if r["model"] == model]
        measured = marginal_s_per_token([(n, float(r["ttft_s"])) for n, r, _ in mine])
        cells = []
        for p in PROFILES:
            rate = marginal_s_per_token([(n, t[p]) for n, _, t in mine])
            cells.append(f"{rate * 1e6:.1f} ({error_fraction(rate, measured):+.1%})")
        lines.append(f"| {model} | {measured * 1e6:.1f} | " + " | ".join(cells) + " |")
    return lines


def main() -> int:
    rows = read_rows()
    predicted = predictions(rows)
    title = "megagdn-pto TTFT (one 910B2, vllm-ascend eager, Triton GDN)"
    print(f"{title}: {len(predicted)} of {len(rows)} rows predicted")
    print()
    print("\n".join(table_lines(predicted)))
    print()
    print("\n".join(summary_lines(predicted)))
    print()
    print("\n".join(marginal_lines(predicted)))
    print()
    skipped = sorted({(row["model"], reason) for row in rows if (reason := skip_reason(row)) is not None})
    for model, reason in skipped:
        count = sum(row["model"] == model for row in rows)
        print(f"not predicted: {model} ({count} rows): {reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
