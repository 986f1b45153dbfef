"""`kvplan sweep`'s outputs: the batch x context (x weight dtype) grid as CSV, JSON or a rich table.

Parse and compute are planner/cli/perf.py's sweep_command (over planner.serving.sweep); this module only
formats its SweepResult. Imported inside sweep_command, so `kvplan --help` stays instant.
"""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING

from planner import units

if TYPE_CHECKING:
    from rich.table import Table

    from planner.serving.sweep import SweepResult

CSV_COLUMNS = (
    "weight_dtype",
    "batch",
    "ctx_tokens",
    "decode_step_s",
    "tokens_per_s",
    "per_user_tokens_per_s",
    "fits_memory",
    "decode_step_s_low",
    "decode_step_s_high",
)


def sweep_csv(result: SweepResult) -> str:
    """The grid as CSV in SI units (seconds, tokens/s), one row per point."""
    import numpy as np

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    shape = result.decode_step_s.shape
    scheme_idx, batch_idx, ctx_idx = (a.ravel() for a in np.indices(shape))
    rows = zip(
        np.asarray(result.weight_dtypes)[scheme_idx],
        result.batch[batch_idx],
        result.ctx_tokens[ctx_idx],
        result.decode_step_s.ravel(),
        result.tokens_per_s.ravel(),
        result.per_user_tokens_per_s.ravel(),
        result.fits_memory.ravel(),
        result.decode_step_s_low.ravel(),
        result.decode_step_s_high.ravel(),
        strict=True,
    )
    writer.writerows(
        (s, int(b), int(c), f"{t:.6g}", f"{a:.6g}", f"{u:.6g}", bool(f), f"{lo:.6g}", f"{hi:.6g}")
        for s, b, c, t, a, u, f, lo, hi in rows
    )
    return buffer.getvalue()


def sweep_json(result: SweepResult) -> str:
    """The grid as JSON: header fields plus nested arrays indexed [dtype][batch][ctx]."""
    payload = {
        "model": result.model,
        "card": result.card,
        "kv_dtype": result.kv_dtype,
        "tp": result.tp,
        "calibrated": result.calibrated,
        "tokens_per_step": result.tokens_per_step,
        "weight_dtypes": list(result.weight_dtypes),
        "batch": result.batch.tolist(),
        "ctx_tokens": result.ctx_tokens.tolist(),
        "decode_step_s": result.decode_step_s.tolist(),
        "tokens_per_s": result.tokens_per_s.tolist(),
        "per_user_tokens_per_s": result.per_user_tokens_per_s.tolist(),
        "fits_memory": result.fits_memory.tolist(),
        "speed_range": {
            "source": result.speed_band.source,
            "label": result.speed_band.label,
            "decode_step_s_low": result.decode_step_s_low.tolist(),
            "decode_step_s_high": result.decode_step_s_high.tolist(),
            "notes": result.speed_band.notes,
        },
    }
    return json.dumps(payload)


MAX_TABLE_ROWS = (
    200  # a longer table is not read (and rich takes minutes over 100 000 rows): csv/json have all
)


def table_points(result: SweepResult) -> list[tuple[int, int, int]]:
    """Grid indices (dtype, batch, ctx) the table shows: every point when there are at most MAX_TABLE_ROWS;
    else the frontier (per dtype and ctx, the batches that fit memory and raise aggregate tok/s over every
    smaller batch: the others give less per user for no more in total), thinned evenly to MAX_TABLE_ROWS."""
    import numpy as np

    if result.decode_step_s.size <= MAX_TABLE_ROWS:
        return [tuple(int(i) for i in index) for index in np.ndindex(result.decode_step_s.shape)]  # type: ignore[misc]
    aggregate = np.where(result.fits_memory, result.tokens_per_s, -np.inf)
    best_below = np.maximum.accumulate(aggregate, axis=1)
    best_below = np.concatenate([np.full_like(best_below[:, :1], -np.inf), best_below[:, :-1]], axis=1)
    frontier = np.argwhere(result.fits_memory & (aggregate > best_below))
    if len(frontier) > MAX_TABLE_ROWS:
        frontier = frontier[np.unique(np.linspace(0, len(frontier) - 1, MAX_TABLE_ROWS).round().astype(int))]
    return [(int(i), int(j), int(k)) for i, j, k in frontier]


def sweep_table(result: SweepResult) -> Table:
    """The grid as a rich table (human units: ms, tok/s); past MAX_TABLE_ROWS points, its frontier
    (table_points) and how many points were left out."""
    from rich.table import Table

    band = result.speed_band
    shown, total = table_points(result), result.decode_step_s.size
    left_out = (
        [f"{len(shown)} of {total} points shown: the frontier (fits memory, more aggregate tok/s than every "
         f"smaller batch), thinned to {MAX_TABLE_ROWS} rows; {total - len(shown)} left out; --format csv or "
         "json prints every point"]
        if len(shown) < total
        else []
    )  # fmt: skip
    table = Table(
        title=f"{result.model} on {result.card}, KV {result.kv_dtype}, tp={result.tp} ({band.label})",
        caption="\n".join([*left_out, f"source: {band.source}", *(f"range: {note}" for note in band.notes)]),
    )
    for name in ("dtype", "batch", "ctx", "TPOT", "range ms", "per user", "aggregate", "fits"):
        table.add_column(name, justify="left" if name == "dtype" else "right")
    for i, j, k in shown:
        low, high = (units.s_to_ms(s[i, j, k]) for s in (result.decode_step_s_low, result.decode_step_s_high))
        table.add_row(
            result.weight_dtypes[i],
            str(int(result.batch[j])),
            str(int(result.ctx_tokens[k])),
            units.fmt_ms(float(result.decode_step_s[i, j, k])),
            units.fmt_span(low, high),
            units.fmt_tokens_per_s(float(result.per_user_tokens_per_s[i, j, k])),
            units.fmt_tokens_per_s(float(result.tokens_per_s[i, j, k])),
            "yes" if result.fits_memory[i, j, k] else "no",
        )
    return table
