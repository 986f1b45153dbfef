"""Measured end-to-end decode points from a user's benchmark (CSV), and the Deployment each one describes.

Columns (header names, any order; extra columns are ignored):
    model, card, dtype, kv_dtype, tp, batch, ctx   and   decode_step_s, tokens_per_s or per_user_tokens_per_s
    engine (optional): the engine that ran the point (planner/perf/kernels.py; empty or absent: mindie)
`tokens_per_s` is the whole batch's decode throughput, so decode_step_s = batch / tokens_per_s;
`per_user_tokens_per_s` is one sequence's (what serving benchmarks print per request): step = 1 / it.
`ctx` is the tokens each sequence holds in its KV cache at that step ("8192" or "8k").
Every error names the file, the line and the column.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from planner import catalog, readers, units
from planner.deployment import Deployment
from planner.dtypes import WEIGHT_ALIASES, WEIGHT_SCHEMES, storage_dtype
from planner.errors import DataFileError, KvplanError
from planner.kinds import DEFAULT_ENGINE, EngineName, parse_engine
from planner.schema import HardwareProfile

REQUIRED_COLUMNS = ("model", "card", "dtype", "kv_dtype", "tp", "batch", "ctx")
TIME_COLUMNS = ("decode_step_s", "tokens_per_s", "per_user_tokens_per_s")


@dataclass(frozen=True)
class BenchPoint:
    """One measured decode step: what ran and how long a step took."""

    model: str
    card: str
    dtype: str
    kv_dtype: str
    tp: int
    batch: int
    ctx_tokens: int
    decode_step_s: float
    where: str  # "file:line", for messages
    engine: EngineName = DEFAULT_ENGINE


MAX_BENCH_ROWS = 5000  # a bench of more points is split into files; bounds validate/fit time

MIN_POSITIVE = 1e-12  # below any time (s), rate or count a bench can measure
MAX_POSITIVE = 1e11


def _positive(text: str, *, kind: type, where: str, column: str) -> float:
    try:
        value = kind(text)
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
        per_user = _positive(row[column], kind=float, where=where, column=column)
        return 1.0 / per_user
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
        return storage_dtype(text).value
    except ValueError as exc:
        raise DataFileError(f"{where}: column kv_dtype: unknown dtype (got {text!r})") from exc


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
    )


def _engine(text: str, *, where: str) -> EngineName:
    try:
        return parse_engine(text, flag="column engine")
    except KvplanError as exc:
        raise DataFileError(f"{where}: {exc}") from exc


def read_bench_points(path: Path) -> list[BenchPoint]:
    """Every point of a bench CSV; DataFileError on a missing column, a bad value, or no rows."""
    text = readers.read_text_capped(path)
    reader = csv.DictReader(text.splitlines())
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing or not any(c in header for c in TIME_COLUMNS):
        wanted = missing or ["decode_step_s, tokens_per_s or per_user_tokens_per_s"]
        raise DataFileError(f"{path}:1: header: missing column {', '.join(wanted)} (got {', '.join(header)})")
    points = []
    for line, row in enumerate(reader, start=2):
        if line > MAX_BENCH_ROWS + 1:
            raise DataFileError(
                f"{path}: too many rows (got more than {MAX_BENCH_ROWS}, expected at most so many)"
            )
        clean = {(k or "").strip(): (v or "") for k, v in row.items()}
        points.append(parse_row(clean, where=f"{path}:{line}"))
    if not points:
        raise DataFileError(f"{path}: no data rows (expected at least one point)")
    return points


def deployment_for(
    point: BenchPoint, *, hardware: HardwareProfile | None = None, calibrated: bool = True
) -> Deployment:
    """The Deployment a point ran (hardware overrides the point's card when given); errors name the point."""
    try:
        card, alias = catalog.resolve_model(point.model)
        hw = hardware if hardware is not None else catalog.resolve_card(point.card)
        return Deployment(
            model=card,
            hardware=hw,
            weight_scheme_name=point.dtype,
            kv_dtype=storage_dtype(point.kv_dtype),
            tp=point.tp,
            ctx_tokens=point.ctx_tokens,
            batch=point.batch,
            calibrated=calibrated,
            model_alias=alias,
            engine=point.engine,
        )
    except KvplanError as exc:
        raise DataFileError(f"{point.where}: {exc}") from exc
