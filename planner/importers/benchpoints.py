"""Measured benchmark rows (CSV) of two kinds; the Deployment each one describes: benchdeployment.py.

Step rows (one decode step at a fixed batch and context) have the columns (any order; extra columns ignored):
    model, card, dtype, kv_dtype, tp, batch, ctx   and   decode_step_s, tokens_per_s or per_user_tokens_per_s
`tokens_per_s` is the whole batch's decode throughput, so decode_step_s = batch / tokens_per_s;
`per_user_tokens_per_s` is one sequence's: step = 1 / it. `ctx`: tokens each sequence holds ("8192", "8k").

Serving rows (what load tools report for a closed-loop run at fixed concurrency, predicted by
planner/serving/closed_loop.py through planner/fit/serving_rows.py) have
    model, card, dtype, kv_dtype, tp, engine, concurrency, input_tokens, output_tokens, output_tokens_per_s
and optional mtp (draft tokens), mtp_acceptance, speculative_method (mtp, eagle3, dflash: who drafts),
ttft_s, tpot_s, dp, ep, max_num_seqs, max_num_batched_tokens,
num_prompts, memory_gib (the card's capacity when it differs from the profile, e.g. the seed's 64 GB 950PR),
memory_fraction (the engine's memory share, vLLM's --gpu-memory-utilization or MindIE's NPU_MEMORY_FRACTION,
in (0, 1]; default the plan's),
engine_version (rows of different versions are different set-ups to the fit's contradiction check),
arrivals (how the load tool's requests fall: waves, the default, for tools that start every client together
at fixed lengths; random for a client loop without ignore_eos, whose requests end apart; closed_loop.py),
request_rate (requests/s, > 0: an open-loop run at a constant or Poisson rate, planner/serving/open_loop.py;
its concurrency may be empty when ttft_s and tpot_s are given: Little's law gives the mean in the system).
dp (--data-parallel-size, default 1) and ep (expert-parallel ranks, default 1; tp x dp under vLLM's
--enable-expert-parallel) describe the layout; the experts are split as planner/layout.py models them.
prefix_cached_fraction (in (0, 1]; empty: 0) is the share of each prompt found in the prefix cache (a
shared-prefix dataset with prefix caching on): prefill computes only the rest (--prefix-cached-fraction).
A row with a non-empty output_tokens_per_s is a serving row; one file may hold both kinds.

Both: `engine` is the engine that ran the row (mindie, vllm, transformers; vllm-ascend = vllm; empty or
absent on a step row: mindie); `model` is a catalogue id or alias, or a Hugging Face name (`Qwen/Qwen3-32B`,
matched against the cards' source.hf_repo). Every error names the file, the line and the column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from planner import csvfiles, readers, units
from planner.deployment import SPECULATIVE_METHODS
from planner.dtypes import WEIGHT_ALIASES, WEIGHT_SCHEMES, storage_dtype
from planner.errors import DataFileError, KvplanError
from planner.kinds import ARRIVALS, DEFAULT_ENGINE, Arrivals, EngineName, parse_engine

REQUIRED_COLUMNS = ("model", "card", "dtype", "kv_dtype", "tp", "batch", "ctx")
TIME_COLUMNS = ("decode_step_s", "tokens_per_s", "per_user_tokens_per_s")


@dataclass(frozen=True)
class RowSetup:
    """What a bench row ran: model and card ids, weight and KV dtype, tensor-parallel degree."""

    model: str
    card: str
    dtype: str
    kv_dtype: str
    tp: int


@dataclass(frozen=True)
class BenchPoint(RowSetup):
    """One measured decode step: what ran (RowSetup) and how long a step took."""

    batch: int
    ctx_tokens: int
    decode_step_s: float
    where: str  # "file:line", for messages
    engine: EngineName = DEFAULT_ENGINE
    engine_given: bool = True  # False: the engine cell was empty (DEFAULT_ENGINE; --engine may set it)


# [measured: 2 000 distinct decode-step rows took 7.1 s of CPU in `validate` and 8.4 s in `calibrate
# --from-bench`, 5 000 over 10 s (issue 26's bound), on the shared 2-core dev box, 2026-12-04]; the
# largest shipped bench (lab/published/ascend-serving.csv) has 414 rows. Split a larger bench into files.
MAX_BENCH_ROWS = 1000

MIN_POSITIVE = 1e-12  # below any time (s), rate or count a bench can measure
MAX_POSITIVE = 1e11


def _positive(text: str, *, kind: type, where: str, column: str) -> float:
    try:
        value = kind(text) if text.isascii() and "_" not in text else None  # not "1_6", nor Arabic digits
    except ValueError:
        value = None
    if value is None or value <= 0:
        raise DataFileError(f"{where}: column {column}: must be a {kind.__name__} > 0 (got {text!r})")
    if not MIN_POSITIVE <= value <= MAX_POSITIVE:  # NaN, inf, denormal
        raise DataFileError(
            f"{where}: column {column}: must be a finite {kind.__name__} in "
            f"[{MIN_POSITIVE:g}, {MAX_POSITIVE:g}] (got {text!r})"
        )
    return float(value)


def _ctx(text: str, *, where: str) -> int:
    try:
        return units.parse_tokens(text)
    except ValueError as exc:
        raise DataFileError(f"{where}: column ctx: {exc} (got {text!r})") from exc


def _step_s(row: dict[str, str], *, where: str, batch: int) -> float:
    if (row.get("decode_step_s") or "").strip():
        return _positive(row["decode_step_s"], kind=float, where=where, column="decode_step_s")
    if (row.get("tokens_per_s") or "").strip():
        return batch / _positive(row["tokens_per_s"], kind=float, where=where, column="tokens_per_s")
    if (row.get("per_user_tokens_per_s") or "").strip():
        column = "per_user_tokens_per_s"
        return 1.0 / _positive(row[column], kind=float, where=where, column=column)
    raise DataFileError(
        f"{where}: decode_step_s, tokens_per_s and per_user_tokens_per_s are all empty (expected one of them)"
    )


def _dtype(text: str, *, where: str) -> str:
    key = text.strip().lower()
    name = WEIGHT_ALIASES.get(key, key)
    if name not in WEIGHT_SCHEMES:
        raise DataFileError(
            f"{where}: column dtype: unknown weight dtype (got {text!r}, "
            f"expected one of {', '.join(WEIGHT_SCHEMES)})"
        )
    return name


def _kv_dtype(text: str, *, where: str) -> str:
    try:
        kv = storage_dtype(text).value
    except ValueError:
        kv = "fp32"
    if kv == "fp32":  # the plan's --kv-dtype rule (planner/inputs.parse_kv_dtype): no engine caches fp32 KV
        raise DataFileError(
            f"{where}: column kv_dtype: unknown KV dtype (got {text!r}, expected bf16, fp16, fp8 or int8)"
        )
    return kv


def parse_row(row: dict[str, str], *, where: str) -> BenchPoint:
    """Validate one CSV row into a BenchPoint."""
    for column in REQUIRED_COLUMNS:
        if not (row.get(column) or "").strip():
            raise DataFileError(f"{where}: column {column}: empty (expected a value)")
    batch = int(_positive(row["batch"], kind=int, where=where, column="batch"))
    return BenchPoint(
        model=row["model"].strip(),
        card=row["card"].strip(),
        dtype=_dtype(row["dtype"], where=where),
        kv_dtype=_kv_dtype(row["kv_dtype"], where=where),
        tp=int(_positive(row["tp"], kind=int, where=where, column="tp")),
        batch=batch,
        ctx_tokens=_ctx(row["ctx"], where=where),
        decode_step_s=_step_s(row, where=where, batch=batch),
        where=where,
        engine=_engine(row.get("engine") or DEFAULT_ENGINE, where=where),
        engine_given=bool((row.get("engine") or "").strip()),
    )


# Names load tools and published tables give engines -> the kernel structure kvplan models.
ENGINE_ALIASES = {"vllm-ascend": "vllm", "vllm_ascend": "vllm", "mindie-llm": "mindie", "hf": "transformers"}


def _engine(text: str, *, where: str) -> EngineName:
    key = text.strip().lower()
    try:
        return parse_engine(ENGINE_ALIASES.get(key, key), flag="column engine")
    except KvplanError as exc:
        raise DataFileError(f"{where}: {exc}") from exc


SERVING_COLUMNS = (
    "model",
    "card",
    "dtype",
    "tp",
    "engine",
    "concurrency",
    "input_tokens",
    "output_tokens",
    "output_tokens_per_s",
)


@dataclass(frozen=True)
class ServingPoint(RowSetup):
    """One measured closed-loop serving run: what ran (RowSetup), how it was driven, the output tok/s it
    reached.

    kv_dtype "" (an empty cell): the 16-bit activation dtype, what engines use without KV quantization.
    max_batch: the engine's running-sequence limit (max_num_seqs) when given; prefill_tokens: its prefill
    token budget (max_num_batched_tokens / maxPrefillTokens) when given; dp replicas share the concurrency;
    ep: ranks the routed experts are split over (1: no expert parallelism).
    """

    engine: EngineName
    concurrency: int
    input_tokens: int
    output_tokens: int
    output_tokens_per_s: float
    where: str
    mtp: int = 0
    mtp_acceptance_fraction: float | None = None
    speculative_method: str = "mtp"  # who drafts the mtp tokens (deployment.SPECULATIVE_METHODS)
    ttft_s: float | None = None
    tpot_s: float | None = None
    dp: int = 1
    ep: int = 1
    max_batch: int | None = None
    prefill_tokens: int | None = None
    num_requests: int | None = None
    memory_gib: float | None = None
    memory_fraction: float | None = None  # the engine's memory share (0, 1]; None: the plan's default
    engine_version: str = ""  # e.g. a vllm-ascend commit: rows of different versions are different set-ups
    arrivals: Arrivals = "waves"  # how the tool's requests fall into the decode stream (closed_loop.py)
    # open loop (column request_rate, requests/s over all dp replicas): requests arrive at this rate whatever
    # the engine does (planner/serving/open_loop.py); concurrency is then the mean requests in the system that
    # the row's own TTFT and TPOT give (Little's law), or the cell when stated
    request_rate_per_s: float | None = None
    # a pass threshold's base, not a measurement (column floor_fraction): the run reached at least
    # floor_fraction x output_tokens_per_s (a CI baseline: >= 0.97 x it); None: a measurement
    floor_fraction: float | None = None
    # with a floor: the run reached at most (1 + this) x output_tokens_per_s (column floor_headroom_fraction;
    # an assumption about how far above its floor a CI run ran), None: no ceiling
    floor_headroom_fraction: float | None = None
    floor_margin_fraction: float | None = None  # with a floor: its assumed spread above it (censored.py)
    # share of each prompt the engine's prefix cache held (column prefix_cached_fraction, a shared-prefix
    # dataset with prefix caching on): prefill computes only the rest (Deployment.prefix_cached_fraction)
    prefix_cached_fraction: float = 0.0


def _optional(row: dict[str, str], column: str, *, kind: type, where: str) -> float | None:
    text = (row.get(column) or "").strip()
    return _positive(text, kind=kind, where=where, column=column) if text else None


def _optional_int(row: dict[str, str], column: str, *, where: str) -> int | None:
    value = _optional(row, column, kind=int, where=where)
    return None if value is None else int(value)


def _tokens(row: dict[str, str], column: str, *, where: str) -> int:
    try:
        return units.parse_tokens(row[column])
    except ValueError as exc:
        raise DataFileError(f"{where}: column {column}: {exc} (got {row[column]!r})") from exc


def _speculative_method(row: dict[str, str], *, where: str) -> str:
    """The optional speculative_method cell (vLLM's --speculative-config method); "mtp" when empty."""
    method = (row.get("speculative_method") or "").strip() or "mtp"
    if method not in SPECULATIVE_METHODS:
        expected = ", ".join(SPECULATIVE_METHODS)
        raise DataFileError(
            f"{where}: column speculative_method: {method!r} not modelled (expected {expected})"
        )
    return method


def _fraction(row: dict[str, str], column: str, *, where: str) -> float | None:
    """An optional share cell in (0, 1] (mtp_acceptance, floor_fraction, memory_fraction); None when empty."""
    value = _optional(row, column, kind=float, where=where)
    if value is not None and value > 1:
        text = row[column].strip()
        raise DataFileError(f"{where}: column {column}: must be a fraction in (0, 1] (got {text!r})")
    return value


def parse_serving_row(row: dict[str, str], *, where: str) -> ServingPoint:
    """Validate one CSV row with output_tokens_per_s into a ServingPoint."""
    rate = _optional(row, "request_rate", kind=float, where=where)
    for column in SERVING_COLUMNS:
        if not (row.get(column) or "").strip() and not (column == "concurrency" and rate is not None):
            raise DataFileError(f"{where}: column {column}: empty (expected a value)")
    mtp_text = (row.get("mtp") or "").strip()
    return ServingPoint(
        model=row["model"].strip(),
        card=row["card"].strip(),
        dtype=_dtype(row["dtype"], where=where),
        kv_dtype=_kv_dtype(row["kv_dtype"], where=where) if (row.get("kv_dtype") or "").strip() else "",
        tp=int(_positive(row["tp"], kind=int, where=where, column="tp")),
        engine=_engine(row["engine"], where=where),
        concurrency=_concurrency(row, rate=rate, where=where),
        input_tokens=_tokens(row, "input_tokens", where=where),
        output_tokens=_tokens(row, "output_tokens", where=where),
        output_tokens_per_s=_positive(
            row["output_tokens_per_s"], kind=float, where=where, column="output_tokens_per_s"
        ),
        where=where,
        mtp=0 if mtp_text in ("", "0") else int(_positive(mtp_text, kind=int, where=where, column="mtp")),
        mtp_acceptance_fraction=_fraction(row, "mtp_acceptance", where=where),
        speculative_method=_speculative_method(row, where=where),
        ttft_s=_optional(row, "ttft_s", kind=float, where=where),
        tpot_s=_optional(row, "tpot_s", kind=float, where=where),
        dp=_optional_int(row, "dp", where=where) or 1,
        ep=_optional_int(row, "ep", where=where) or 1,
        max_batch=_optional_int(row, "max_num_seqs", where=where),
        prefill_tokens=_optional_int(row, "max_num_batched_tokens", where=where),
        num_requests=_optional_int(row, "num_prompts", where=where),
        memory_gib=_optional(row, "memory_gib", kind=float, where=where),
        memory_fraction=_fraction(row, "memory_fraction", where=where),
        engine_version=(row.get("engine_version") or "").strip(),
        arrivals=_arrivals(row, where=where),
        request_rate_per_s=rate,
        floor_fraction=_fraction(row, "floor_fraction", where=where),
        floor_headroom_fraction=_optional(row, "floor_headroom_fraction", kind=float, where=where),
        floor_margin_fraction=_fraction(row, "floor_margin_fraction", where=where),
        prefix_cached_fraction=_fraction(row, "prefix_cached_fraction", where=where) or 0.0,
    )


def _concurrency(row: dict[str, str], *, rate: float | None, where: str) -> int:
    """The concurrency cell; for an open-loop row without one, Little's law on the row's own figures.

    Formula: ceil(rate * (ttft + (output - 1) * tpot)), mean requests in the system (at least 1).
    """
    if (row.get("concurrency") or "").strip() or rate is None:
        return int(_positive(row["concurrency"], kind=int, where=where, column="concurrency"))
    ttft = _optional(row, "ttft_s", kind=float, where=where)
    tpot = _optional(row, "tpot_s", kind=float, where=where)
    if ttft is None or tpot is None:
        raise DataFileError(
            f"{where}: column concurrency: empty on an open-loop row without ttft_s and tpot_s (expected a "
            "concurrency, or both so that Little's law gives the mean requests in the system)"
        )
    output = _tokens(row, "output_tokens", where=where)
    return max(1, math.ceil(rate * (ttft + (output - 1) * tpot)))


def _arrivals(row: dict[str, str], *, where: str) -> Arrivals:
    text = (row.get("arrivals") or "").strip().lower() or "waves"
    for mode in ARRIVALS:
        if text == mode:
            return mode
    expected = " or ".join(ARRIVALS)
    raise DataFileError(f"{where}: column arrivals: unknown mode (got {text!r}, expected {expected})")


def _check_header(path: Path, header: list[str]) -> None:
    step_missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if not step_missing and any(c in header for c in TIME_COLUMNS):
        return
    serving_missing = [c for c in (*SERVING_COLUMNS, "kv_dtype") if c not in header]
    if not serving_missing:
        return
    wanted = step_missing or ["decode_step_s, tokens_per_s or per_user_tokens_per_s"]
    raise DataFileError(
        f"{path}:1: header: missing column {', '.join(wanted)} for decode-step rows, or "
        f"{', '.join(serving_missing)} for serving rows (got {', '.join(header)})"
    )


def read_bench_rows(path: Path) -> tuple[list[BenchPoint], list[ServingPoint]]:
    """(step rows, serving rows) of a bench CSV; DataFileError on a missing column, a bad value, no rows."""
    text = readers.read_text_capped(path)
    reader = csvfiles.csv_dict_reader(text.splitlines(), where=str(path))
    _check_header(path, [h.strip() for h in reader.fieldnames or []])
    steps: list[BenchPoint] = []
    serving: list[ServingPoint] = []
    for line, row in enumerate(reader, start=2):
        if line > MAX_BENCH_ROWS + 1:
            raise DataFileError(
                f"{path}: too many rows (got more than {MAX_BENCH_ROWS}, expected at most {MAX_BENCH_ROWS}; "
                "each row is a fit term or a prediction)"
            )
        clean = {(k or "").strip(): (v or "") for k, v in row.items()}
        where = f"{path}:{line}"
        if (clean.get("output_tokens_per_s") or "").strip():
            serving.append(parse_serving_row(clean, where=where))
        else:
            steps.append(parse_row(clean, where=where))
    if not steps and not serving:
        raise DataFileError(f"{path}: no data rows (expected at least one point)")
    return steps, serving


RowT = TypeVar("RowT", BenchPoint, ServingPoint)


def without_repeats(rows: list[RowT]) -> tuple[list[RowT], int]:
    """(rows with every exact repeat of an earlier row dropped, how many were dropped): a repeated row
    (all columns equal, another line) adds no information but costs a fit or a prediction each."""
    seen: set[RowT] = set()
    kept: list[RowT] = []
    for row in rows:
        key = replace(row, where="")
        if key not in seen:
            seen.add(key)
            kept.append(row)
    return kept, len(rows) - len(kept)


def read_bench_points(path: Path) -> list[BenchPoint]:
    """The decode-step rows of a bench CSV; DataFileError when it has none (serving rows: read_bench_rows)."""
    steps, serving = read_bench_rows(path)
    if not steps:
        raise DataFileError(
            f"{path}: no decode-step rows (got {len(serving)} serving rows, expected batch/ctx rows)"
        )
    return steps
