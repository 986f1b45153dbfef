"""`kvplan sweep`: decode speed over a batch x context (x weight dtype) grid. Parse the grid -> call
planner.serving.sweep -> print it as a rich table, CSV or JSON.

Imports of numpy-backed modules are deferred into the command and the formatters so `kvplan --help` stays
instant.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from planner import units
from planner.cli.flags import STEP_FLAGS, WEIGHT_DTYPES_HELP, ModelOpt, flag_command
from planner.cli.options import fail, plan_request
from planner.errors import KvplanError, PlanInputError
from planner.inputs import DEFAULT_DTYPE

if TYPE_CHECKING:
    from rich.table import Table

    from planner.serving.sweep import SweepResult

FORMATS = ("table", "csv", "json")

MAX_GRID_BATCHES = 4096  # a sweep grid axis longer than this is a typo, not a plan
MAX_BATCH = 10**6  # [assumed: no engine runs a million sequences in one decode step]
# [measured: 65 536 points take ~2 s of CPU as CSV on the 2-core dev box, 2026-12-04]; the grid is
# capped by its work (dtypes x batches x contexts), like simulate's request cap, not axis by axis alone
MAX_GRID_POINTS = 65_536


def check_grid(*, dtypes: int, batches: int, contexts: int) -> None:
    """PlanInputError when the sweep grid has more than MAX_GRID_POINTS points."""
    points = dtypes * batches * contexts
    if points > MAX_GRID_POINTS:
        raise PlanInputError(
            f"--batch/--ctx/--dtype: grid too large (got {dtypes} x {batches} x {contexts} = {points} "
            f"points, expected at most {MAX_GRID_POINTS}); sweep fewer batch sizes or contexts"
        )


BATCH_ITEM = re.compile(r"[0-9]+(?:-[0-9]+)?")


def parse_batches(text: str) -> list[int]:
    """`1,2,4,8`, `1-64` (inclusive) or a mix -> sorted distinct batch sizes >= 1; every item plain ASCII
    digits (no empty item, no open range such as `1-`, no `1_0`)."""
    values: set[int] = set()
    try:
        for item in (part.strip() for part in text.split(",")):
            if not BATCH_ITEM.fullmatch(item):
                raise ValueError(item)
            low, _, high = item.partition("-")
            first, last = int(low), int(high or low)
            if max(first, last) > MAX_BATCH:
                raise PlanInputError(
                    f"--batch: batch size out of range (got {item[:40]!r}, expected 1..{MAX_BATCH})"
                )
            if first > last:  # the suggestion reversed, starting at 1 at least: '1-0' suggests 1-1
                raise PlanInputError(
                    f"--batch: range runs backwards (got {item[:40]!r}, "
                    f"expected low-high with 1 <= low <= high, such as {max(last, 1)}-{first})"
                )
            if last - first >= MAX_GRID_BATCHES or len(values) >= MAX_GRID_BATCHES:
                raise PlanInputError(
                    f"--batch: too many batch sizes (got {text!r}, expected at most {MAX_GRID_BATCHES})"
                )
            values.update(range(first, last + 1))
    except ValueError:
        raise PlanInputError(
            f"--batch: not a batch list (got {text!r}, expected e.g. 1,2,4,8 or 1-64)"
        ) from None
    if not values or min(values) < 1:
        raise PlanInputError(f"--batch: batch sizes must be >= 1 (got {text!r})")
    return sorted(values)


def parse_contexts(text: str) -> list[int]:
    """`256,1k,8k,32k` -> sorted distinct token counts."""
    from planner import inputs

    contexts = sorted(
        {inputs.parse_context(item.strip(), flag="--ctx") for item in text.split(",") if item.strip()}
    )
    if not contexts or len(contexts) > MAX_GRID_BATCHES:
        raise PlanInputError(f"--ctx: expected 1..{MAX_GRID_BATCHES} context lengths (got {text[:80]!r})")
    return contexts


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
    "tpot_s",
    "tpot_s_low",
    "tpot_s_high",
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
        result.tpot_s.ravel(),
        result.tpot_s_low.ravel(),
        result.tpot_s_high.ravel(),
        strict=True,
    )
    writer.writerows(
        (s, int(b), int(c), *(f"{x:.6g}" for x in (t, a, u)), bool(f), *(f"{x:.6g}" for x in times))
        for s, b, c, t, a, u, f, *times in rows
    )
    return buffer.getvalue()


def sweep_json(result: SweepResult) -> str:
    """The grid as JSON: header fields plus nested arrays indexed [dtype][batch][ctx]."""
    payload = {
        "model": result.model,
        "card": result.card,
        "kv_dtype": result.kv_dtype,
        "tp": result.tp,
        "dp": result.dp,  # batch and tokens_per_s are one DP group's
        "calibrated": result.calibrated,
        "tokens_per_step": result.tokens_per_step,
        "weight_dtypes": list(result.weight_dtypes),
        "batch": result.batch.tolist(),
        "ctx_tokens": result.ctx_tokens.tolist(),
        "decode_step_s": result.decode_step_s.tolist(),
        "tpot_s": result.tpot_s.tolist(),  # decode_step_s / tokens_per_step: per output token
        "tokens_per_s": result.tokens_per_s.tolist(),
        "per_user_tokens_per_s": result.per_user_tokens_per_s.tolist(),
        "fits_memory": result.fits_memory.tolist(),
        "speed_range": {
            "source": result.speed_band.source,
            "label": result.speed_band.label,
            "decode_step_s_low": result.decode_step_s_low.tolist(),
            "decode_step_s_high": result.decode_step_s_high.tolist(),
            "tpot_s_low": result.tpot_s_low.tolist(),
            "tpot_s_high": result.tpot_s_high.tolist(),
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


def step_caption(result: SweepResult) -> list[str]:
    """With MTP, what the TPOT column is: ['TPOT: per output token, the decode step / 1.7 tokens per step
    (decode_step_s in --format csv/json)']; [] without drafts (TPOT is the decode step)."""
    if result.tokens_per_step == 1.0:
        return []
    return [
        f"TPOT: per output token, the decode step / {result.tokens_per_step:.2g} tokens per step "
        "(decode_step_s in --format csv/json)"
    ]


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
        title=f"{result.model} on {result.card}, KV {result.kv_dtype}, tp={result.tp}{result.setup} "
        f"({band.label})",
        caption="\n".join(
            [
                *left_out,
                *step_caption(result),
                f"source: {band.source}",
                *(f"range: {note}" for note in band.notes),
            ]
        ),
    )
    # units in the headers, numbers in the cells: the rows stay one line each in an 80-column terminal
    for name in ("dtype", "batch", "ctx", "TPOT ms", "range", "user tok/s", "tok/s", "fits"):
        table.add_column(name, justify="left" if name == "dtype" else "right")
    for i, j, k in shown:
        tpot_s = float(result.tpot_s[i, j, k])
        low, high = (units.s_to_ms(s[i, j, k]) for s in (result.tpot_s_low, result.tpot_s_high))
        table.add_row(
            result.weight_dtypes[i],
            str(int(result.batch[j])),
            str(int(result.ctx_tokens[k])),
            f"{units.s_to_ms(tpot_s):.1f}",
            units.fmt_span(low, high, point=units.s_to_ms(tpot_s), point_decimals=1),
            f"{float(result.per_user_tokens_per_s[i, j, k]):,.1f}",
            f"{float(result.tokens_per_s[i, j, k]):,.1f}",
            "yes" if result.fits_memory[i, j, k] else "no",
        )
    return table


def sweep_command(
    context: typer.Context,
    model: ModelOpt,
    dtype: Annotated[
        str, typer.Option(help=f"Weight dtype(s), comma-separated: the dtype axis ({WEIGHT_DTYPES_HELP}).")
    ] = DEFAULT_DTYPE,
    batch: Annotated[str, typer.Option(help="Batch sizes: 1,2,4,8 or 1-64.")] = "1,2,4,8,16,32,64,128",
    ctx: Annotated[str, typer.Option(help="Context lengths: 256,1k,4k,8k,32k.")] = "256,1k,4k,8k,32k",
    output_format: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
    as_json: Annotated[bool, typer.Option("--json", help="The same as --format json.")] = False,
) -> None:
    """Decode speed over a batch x context (x weight dtype) grid.

    Example: `kvplan sweep -m qwen3-27b --dtype fp8,bf16 --batch 1-128 --ctx 256,8k --format csv`.
    """
    from planner import inputs
    from planner.serving import sweep

    try:
        if output_format not in FORMATS:
            raise PlanInputError(
                f"--format: unknown format (got {output_format!r}, expected table, csv or json)"
            )
        if as_json and output_format == "csv":
            raise PlanInputError("--json: conflicts with --format csv (got both, expected one output format)")
        output_format = "json" if as_json else output_format
        # distinct schemes in the order given: 'fp8,fp8' (or fp8,w8a8-fp8) sweeps fp8 once
        typed = [d.strip() for d in dtype.split(",") if d.strip()]
        dtypes = [d if d.lower() == inputs.AUTO_DTYPE else inputs.parse_weight_scheme(d) for d in typed]
        batches, contexts = parse_batches(batch), parse_contexts(ctx)
        if not dtypes:
            raise PlanInputError(
                f"--dtype: no weight dtype given (got {dtype!r}, expected e.g. bf16 or fp8,bf16)"
            )
        check_grid(dtypes=len(dtypes), batches=len(batches), contexts=len(contexts))
        # --dtype, --batch and --ctx are lists here: the request takes the first dtype and the longest ctx
        request = plan_request(context, dtype=dtypes[0], ctx=str(max(contexts)), batch=None)
        dep = inputs.to_deployment(request)
        dtypes = list(dict.fromkeys(inputs.weight_dtype_on(d, hardware=dep.hardware) for d in dtypes))
        result = sweep.sweep(dep, batch=batches, ctx_tokens=contexts, weight_dtypes=dtypes)
    except KvplanError as exc:
        fail(exc)
    if output_format == "csv":
        sys.stdout.write(sweep_csv(result))
    elif output_format == "json":
        sys.stdout.write(sweep_json(result) + "\n")
    else:
        from rich.console import Console

        Console(highlight=False).print(sweep_table(result))


def register(app: typer.Typer) -> None:
    """Add `sweep` to the `kvplan` app."""
    app.command("sweep", cls=flag_command((None, STEP_FLAGS)))(sweep_command)
