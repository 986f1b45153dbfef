"""`kvplan bench import`: load-tool result files -> serving bench rows (CSV) for `calibrate --from-bench`.

Parse -> call planner.importers.servingresult -> format. Reads `vllm bench serve --save-result` JSON, AISBench
performances/*.json|*.csv and genai-perf / AIPerf CSV exports; the flags give what those files do not record
(model, card, dtypes, tp, dp, ep, engine, MTP). Rows go to stdout unless --out (written atomically, no
clobber).
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path
from typing import Annotated

import typer

from planner.cli.options import CardOpt, DpOpt, DtypeOpt, EpOpt, KvDtypeOpt, MtpOpt, TpOpt, fail
from planner.errors import KvplanError, PlanInputError

bench_app = typer.Typer(help="Turn load-tool result files into serving bench rows.")

FilesArg = Annotated[
    list[Path], typer.Argument(help="Result files (vllm bench JSON, AISBench, genai-perf CSV).")
]
EngineName = Annotated[str, typer.Option(help="Engine that served the run: mindie, vllm, transformers.")]
ConcurrencyOpt = Annotated[
    int | None, typer.Option(min=1, help="Cap on requests in flight (required for genai-perf CSVs).")
]
AcceptanceOpt = Annotated[
    float | None, typer.Option(help="Measured acceptance rate of each draft token (when known).")
]


FORMATS = (
    "vllm bench serve --save-result JSON (vllm-bench-serve)",
    "AISBench performances/<dataset>.json and .csv (aisbench)",
    "genai-perf profile_export_genai_perf.csv or AIPerf profile_export_aiperf.csv (needs --concurrency)",
)


def register(app: typer.Typer) -> None:
    """Add the `bench` sub-app with its `import` command."""
    bench_app.callback(invoke_without_command=True)(list_formats)
    bench_app.command("import")(import_results)
    app.add_typer(bench_app, name="bench")


def list_formats(ctx: typer.Context) -> None:
    """List the result formats `kvplan bench import` reads."""
    if ctx.invoked_subcommand is None:
        typer.echo("kvplan bench import FILE... reads:\n" + "\n".join(f"  {line}" for line in FORMATS))


def setup_columns(
    *,
    model: str,
    card: str,
    dtype: str,
    kv_dtype: str | None,
    tp: int,
    engine: str,
    mtp: int,
    layout: tuple[int, int] = (1, 1),
) -> dict[str, str]:
    """The row cells the flags give, each validated (one clear error naming the flag); layout = (dp, ep)."""
    from planner import catalog
    from planner.dtypes import WEIGHT_ALIASES, WEIGHT_SCHEMES, storage_dtype
    from planner.kinds import parse_engine

    catalog.resolve_model(model)
    catalog.resolve_card(card)
    scheme = WEIGHT_ALIASES.get(dtype.strip().lower(), dtype.strip().lower())
    if scheme not in WEIGHT_SCHEMES:
        raise PlanInputError(
            f"--dtype: unknown weight dtype (got {dtype!r}, expected one of {', '.join(WEIGHT_SCHEMES)})"
        )
    try:
        kv = storage_dtype(kv_dtype or "bf16").value
    except ValueError as exc:
        raise PlanInputError(f"--kv-dtype: unknown dtype (got {kv_dtype!r})") from exc
    for flag, degree in (("--tp", tp), ("--dp", layout[0]), ("--ep", layout[1])):
        if degree < 1:
            raise PlanInputError(f"{flag}: must be >= 1 (got {degree})")
    if mtp < 0:
        raise PlanInputError(f"--mtp: must be >= 0 (got {mtp})")
    from planner import capacity, inputs

    request = inputs.PlanRequest(
        model=model, card=card, dtype=scheme, kv_dtype=kv_dtype, tp=tp, engine=engine,
        dp=layout[0], ep=layout[1],  # --mtp keeps its own check above (a draft model may supply it)
    )  # fmt: skip
    capacity.check_supported(inputs.to_deployment(request))  # the plan's checks, on the same values
    return {"model": model.strip(), "card": card, "dtype": scheme, "kv_dtype": kv, "tp": str(tp),
            "dp": str(layout[0]), "ep": str(layout[1]), "engine": parse_engine(engine),
            "mtp": str(mtp)}  # fmt: skip


def rows_csv(rows: list[dict[str, str]]) -> str:
    """The rows as CSV text, header first (servingresult.ROW_COLUMNS)."""
    from planner.importers.servingresult import ROW_COLUMNS

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(ROW_COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def import_results(
    files: FilesArg,
    model: Annotated[str, typer.Option("--model", "-m", help="Model id, alias or HF repo name.")],
    card: CardOpt,
    dtype: DtypeOpt = "bf16",
    kv_dtype: KvDtypeOpt = None,
    tp: TpOpt = 1,
    dp: DpOpt = 1,
    ep: EpOpt = 1,
    engine: EngineName = "vllm",
    mtp: MtpOpt = 0,
    mtp_acceptance: AcceptanceOpt = None,
    concurrency: ConcurrencyOpt = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the rows here (default: stdout).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
) -> None:
    """Read load-tool result files; print one serving bench row each: `kvplan bench import r.json ...`."""
    from planner.cli.models import write_text_atomic
    from planner.importers import servingfiles, servingresult

    try:
        setup = setup_columns(
            model=model,
            card=card,
            dtype=dtype,
            kv_dtype=kv_dtype,
            tp=tp,
            engine=engine,
            mtp=mtp,
            layout=(dp, ep),
        )
        if mtp_acceptance is not None:
            if not 0 <= mtp_acceptance <= 1:
                raise PlanInputError(f"--mtp-acceptance: must be in [0, 1] (got {mtp_acceptance})")
            setup["mtp_acceptance"] = f"{mtp_acceptance:g}"
        rows = [
            servingresult.bench_row(
                servingfiles.read_serving_result(path, concurrency=concurrency), setup=setup
            )
            for path in files
        ]
        text = rows_csv(rows)
        if out is None:
            sys.stdout.write(text)
        else:
            write_text_atomic(out, text, force=force)
            typer.echo(f"wrote {out} ({len(rows)} serving rows)", err=True)
    except KvplanError as exc:
        fail(exc)
