"""`kvplan bench import`: load-tool result files -> serving bench rows (CSV) for `calibrate --from-bench`.

Parse -> call planner.importers.servingresult -> format. Reads `vllm bench serve --save-result` JSON, AISBench
performances/*.json|*.csv and genai-perf / AIPerf CSV exports; the flags give what those files do not record
(model, card, dtypes, tp, dp, ep, engine, MTP). Rows go to stdout unless --out (written atomically, no
clobber).
"""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple

import typer

from planner.cli.flags import (
    WEIGHT_DTYPES_HELP,
    CardOpt,
    DpOpt,
    EpOpt,
    KvDtypeOpt,
    MtpOpt,
    TpOpt,
    flag_command,
)
from planner.cli.groups import default_command
from planner.cli.options import FlagGroup, JsonOpt, VersionOpt, fail, print_json
from planner.errors import DataFileError, KvplanError, PlanInputError

if TYPE_CHECKING:
    from planner.importers.servingresult import ServingResult

bench_app = typer.Typer(cls=FlagGroup, help="Turn load-tool result files into serving bench rows.")

FilesArg = Annotated[
    list[Path], typer.Argument(help="Result files (vllm bench JSON, AISBench, genai-perf CSV).")
]
EngineName = Annotated[
    str, typer.Option(help="Engine that served the run: mindie, vllm, transformers, sglang.")
]
ConcurrencyOpt = Annotated[
    int | None, typer.Option(min=1, help="Cap on requests in flight (required for genai-perf CSVs).")
]
AcceptanceOpt = Annotated[
    float | None, typer.Option(help="Measured acceptance rate of each draft token (when known).")
]


# (format, the files it reads, the flag its rows need): the format is the rows' `tool` column
# (servingresult.ServingResult.tool)
FORMATS = (
    ("vllm-bench-serve", "vllm bench serve --save-result JSON", ""),
    ("aisbench", "AISBench performances/<dataset>.json and .csv", ""),
    (
        "genai-perf",
        "genai-perf profile_export_genai_perf.csv or AIPerf profile_export_aiperf.csv",
        "--concurrency",
    ),
)


def register(app: typer.Typer) -> None:
    """Add the `bench` sub-app with its `import` command."""
    default_command(bench_app)(list_formats)
    # --speculative-config: the shared flag (planner/cli/flags.py), after --mtp-acceptance in the help
    bench_app.command("import", cls=flag_command(("mtp_acceptance", ("speculative_config",))))(import_results)
    app.add_typer(bench_app, name="bench")


def list_formats(ctx: typer.Context, as_json: JsonOpt = False, version: VersionOpt = False) -> None:
    """List the result formats `kvplan bench import` reads."""
    if as_json:
        formats = [{"format": tool, "files": files, "needs": needs or None} for tool, files, needs in FORMATS]
        return print_json({"formats": formats})
    lines = [f"  {files} ({tool}{f'; needs {needs}' if needs else ''})" for tool, files, needs in FORMATS]
    typer.echo("kvplan bench import FILE... reads:\n" + "\n".join(lines))


def setup_columns(flags: FileSetup, *, model: str, dtype: str) -> dict[str, str]:
    """The row cells the flags give (`model` and `dtype` as resolved for one file), each validated (one clear
    error naming the flag). The dtypes resolve as the plan's: auto (or none) is the card's 16-bit dtype for
    the weights (inputs.weight_dtype_on) and the activation dtype for the KV cache (inputs.parse_kv_dtype)."""
    from planner import capacity, catalog, inputs
    from planner.kinds import parse_engine

    card, _flag_dtype, kv_dtype, tp, layout, engine, mtp = flags  # dtype: the file's, resolved by the caller
    catalog.resolve_model(model)
    catalog.resolve_card(card)
    for flag, degree in (("--tp", tp), ("--dp", layout[0]), ("--ep", layout[1])):
        if degree < 1:
            raise PlanInputError(f"{flag}: must be >= 1 (got {degree})")
    if mtp < 0:
        raise PlanInputError(f"--mtp: must be >= 0 (got {mtp})")
    request = inputs.PlanRequest(
        model=model, card=card, dtype=dtype, kv_dtype=kv_dtype, tp=tp, engine=engine,
        dp=layout[0], ep=layout[1],  # --mtp keeps its own check above (a draft model may supply it)
    )  # fmt: skip
    dep = inputs.to_deployment(request)
    capacity.check_supported(dep)  # the plan's checks, on the same values
    return {"model": model.strip(), "card": card, "dtype": dep.weight_scheme.name,
            "kv_dtype": dep.kv_dtype.value, "tp": str(tp), "dp": str(layout[0]), "ep": str(layout[1]),
            "engine": parse_engine(engine), "mtp": str(mtp)}  # fmt: skip


# Quantized checkpoints name their scheme at the end of the repo (vllm-ascend/Qwen3-32B-W8A8, msModelSlim's
# W8A8 / W4A8 / W4A4 / W8A8C8 repos, -FP8, -AWQ, -GPTQ-Int4): the suffix, as a weight dtype kvplan knows.
QUANT_SUFFIX = re.compile(
    r"^(?P<base>.+?)-(?P<scheme>w8a8c8|w8a8|w4a8|w4a4|w4a16|w8a16|fp8|int8|awq|gptq(-int4)?)$", re.I
)
QUANT_SCHEMES = {"w8a8c8": "int8", "gptq-int4": "w4a16"}  # C8: the KV-cache int8 part, not a weight scheme


def checkpoint_model(name: str, *, dtype: str | None) -> tuple[str, str | None]:
    """(model as the rows name it, weight dtype) of a model id, alias, Hugging Face repo or quantized
    checkpoint repo (`vllm-ascend/Qwen3-32B-W8A8` -> qwen3-32b, int8). A catalogued name is kept as given; a
    checkpoint repo becomes its card id and its scheme the dtype (--dtype, when given, must agree)."""
    from planner import catalog
    from planner.dtypes import WEIGHT_ALIASES

    name = name.strip()
    try:
        catalog.resolve_model(name)
        return name, dtype
    except KvplanError:
        match = QUANT_SUFFIX.match(name)
        if match is None:
            raise
    base, suffix = match["base"], match["scheme"].lower()
    scheme = QUANT_SCHEMES.get(suffix, WEIGHT_ALIASES.get(suffix, suffix))
    card = None
    for candidate in (base, base.rsplit("/", 1)[-1]):
        try:
            card = catalog.resolve_model(candidate)[0]
            break
        except KvplanError:
            continue
    if card is None:
        catalog.resolve_model(name)  # the catalogue's own error, with its suggestions
    if dtype is not None and WEIGHT_ALIASES.get(dtype.strip().lower(), dtype.strip().lower()) != scheme:
        raise PlanInputError(
            f"--dtype: {name} is a {suffix.upper()} checkpoint "
            f"(got --dtype {dtype}, expected {scheme} or none)"
        )
    return card.id, scheme  # type: ignore[union-attr]


def run_model(model: str | None, result: ServingResult, *, path: Path) -> str:
    """The model a result file's run served: --model, else the file's own model_id; both given and the file's
    a catalogued model (not, say, a local checkpoint path), they must name the same card."""
    from planner import catalog

    if model is None and result.model_id is None:
        raise PlanInputError(f"--model: required for {path} (got none, and the file records no model_id)")
    if model is None or result.model_id is None:
        return str(model or result.model_id)
    try:
        recorded = catalog.resolve_model(checkpoint_model(result.model_id, dtype=None)[0])[0].id
    except KvplanError:
        return model  # the file names a model kvplan does not know (a local path): the flag says which
    if catalog.resolve_model(checkpoint_model(model, dtype=None)[0])[0].id != recorded:
        raise PlanInputError(
            f"--model: {path} was run with model_id {result.model_id!r} (got --model {model!r}, expected the "
            "same model; leave --model out to take the file's)"
        )
    return model


class Drafts(NamedTuple):
    """What the flags say of the runs' speculative decoding: --mtp, --mtp-acceptance, --speculative-config."""

    mtp: int
    acceptance: float | None
    config: str | None


def flag_drafts(drafts: Drafts) -> tuple[str, str, int]:
    """(flag, method, draft tokens) the flags give: --speculative-config's, else --mtp's (method mtp)."""
    from planner.speculation import parsed_speculative_config

    if drafts.config is None:
        return "--mtp", "mtp", drafts.mtp
    if drafts.mtp:
        raise PlanInputError(
            f"--mtp: give the drafts once (got --mtp {drafts.mtp} and --speculative-config, expected one)"
        )
    return ("--speculative-config", *parsed_speculative_config(drafts.config))


def speculation_cells(result: ServingResult, *, drafts: Drafts) -> tuple[dict[str, str], str]:
    """The row's mtp, mtp_acceptance and speculative_method cells, and a note on where they came from: the
    draft tokens and acceptance the file states (vllm bench's spec_decode_* fields; a flag that disagrees is
    an error), else the flags'. The method is the flags' (no result file states it; empty reads as mtp).
    Acceptance: --mtp-acceptance, else the file's accepted / drafted share as the per-draft chained
    acceptance the rows carry (speculation.chained_acceptance)."""
    from planner.deployment import MAX_SPECULATIVE_TOKENS
    from planner.speculation import chained_acceptance

    flag, method, flag_tokens = flag_drafts(drafts)
    stated, share = result.speculative_tokens, result.accepted_draft_fraction
    given = f"; method {method} from {flag}" if flag_tokens else ""
    cells = {"mtp": str(flag_tokens), "speculative_method": method if flag_tokens else ""}
    if drafts.acceptance is not None:
        cells["mtp_acceptance"] = f"{drafts.acceptance:g}"
    if stated is None or share is None:
        source = f"rows take {flag} {flag_tokens}" if flag_tokens else "rows record none (mtp 0)"
        return cells, f"{result.where}: speculative decoding not stated in the file; {source}"
    if stated > MAX_SPECULATIVE_TOKENS:
        raise DataFileError(
            f"{result.where}: spec_decode_draft_tokens / spec_decode_num_drafts: too many draft tokens per "
            f"step (got {stated}, expected 1..{MAX_SPECULATIVE_TOKENS})"
        )
    if flag_tokens and flag_tokens != stated:
        raise PlanInputError(
            f"{flag}: {result.where} states {stated} draft tokens per step (got {flag_tokens}, expected "
            f"{stated} or no flag)"
        )
    acceptance = (
        drafts.acceptance
        if drafts.acceptance is not None
        else chained_acceptance(stated, accepted_share=share)
    )
    cells.update(mtp=str(stated), mtp_acceptance=f"{acceptance:.4g}")
    said = given or "; method not stated (rows read it as mtp; --speculative-config names a draft model's)"
    return cells, (
        f"{result.where}: speculative decoding as the file states it: {stated} draft tokens per step, "
        f"{share:.1%} of drafted tokens accepted (per-draft acceptance {acceptance:.3g}){said}"
    )


def rows_csv(rows: list[dict[str, str]]) -> str:
    """The rows as CSV text, header first (servingresult.ROW_COLUMNS)."""
    from planner.importers.servingresult import ROW_COLUMNS

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(ROW_COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def import_results(
    context: typer.Context,
    files: FilesArg,
    card: CardOpt,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Model id, alias, HF repo or quantized checkpoint repo (default: the file's model_id).",
        ),
    ] = None,
    dtype: Annotated[
        str | None,
        typer.Option(help=f"Weight dtype: {WEIGHT_DTYPES_HELP}; default: checkpoint's, else auto."),
    ] = None,
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
    as_json: JsonOpt = False,
) -> None:
    """Read load-tool result files; print one serving bench row each: `kvplan bench import r.json ...`."""
    from planner.cli.models import write_text_atomic

    drafts = Drafts(mtp=mtp, acceptance=mtp_acceptance, config=context.params["speculative_config"])
    flags = FileSetup(
        card=card, dtype=dtype, kv_dtype=kv_dtype, tp=tp, layout=(dp, ep), engine=engine, mtp=mtp
    )
    try:
        if mtp_acceptance is not None and not 0 <= mtp_acceptance <= 1:
            raise PlanInputError(f"--mtp-acceptance: must be in [0, 1] (got {mtp_acceptance})")
        imported, notes = import_rows(files, model=model, flags=flags, drafts=drafts, concurrency=concurrency)
        text = rows_csv([row for row, _ in imported])
        if out is not None:
            write_text_atomic(out, text, force=force, inputs={f"result file {p}": p for p in files})
        if as_json:  # the notes inside the object: stdout holds it alone, stderr only an error
            return print_json(imported_json(imported, notes=notes, written=out))
        if out is None:
            sys.stdout.write(text)
    except KvplanError as exc:
        fail(exc)
    wrote = [] if out is None else [f"wrote {out} ({len(imported)} serving rows)"]
    typer.echo("\n".join([*(f"note: {note}" for note in notes), *wrote]), err=True)


class FileSetup(NamedTuple):
    """What the flags say of the runs' set-up (the files do not record it); layout = (dp, ep)."""

    card: str
    dtype: str | None
    kv_dtype: str | None
    tp: int
    layout: tuple[int, int]
    engine: str
    mtp: int


def import_rows(
    files: list[Path], *, model: str | None, flags: FileSetup, drafts: Drafts, concurrency: int | None
) -> tuple[list[tuple[dict[str, str], ServingResult]], list[str]]:
    """One serving bench row per file (servingresult.bench_row: the CSV's cells) with the run it came from,
    and the notes to print after the rows (where the speculative decoding came from, lost requests)."""
    from planner.importers import servingfiles, servingresult

    imported, notes = [], []  # the notes go out after the rows: an error is the one line on stderr
    for path in files:
        result = servingfiles.read_serving_result(path, concurrency=concurrency)
        name, scheme = checkpoint_model(run_model(model, result, path=path), dtype=flags.dtype)
        setup = setup_columns(flags, model=name, dtype=scheme or "auto")
        cells, note = speculation_cells(result, drafts=drafts)
        notes.append(note)
        if result.failed_requests:
            notes.append(
                f"{path}: {result.failed_requests} requests failed (of "
                f"{result.failed_requests + (result.requests or 0)}); its rates count the completed "
                "ones, so the row describes a run that lost requests: check the server log before "
                "fitting on it"
            )
        imported.append((servingresult.bench_row(result, setup={**setup, **cells}), result))
    return imported, notes


# The row columns that hold counts and measured values: --json gives them as numbers (the CSV's own cells).
INT_COLUMNS = ("tp", "dp", "ep", "concurrency", "input_tokens", "output_tokens", "mtp", "num_prompts")
FLOAT_COLUMNS = ("output_tokens_per_s", "ttft_s", "tpot_s", "mtp_acceptance", "duration_s")


def imported_json(
    imported: list[tuple[dict[str, str], ServingResult]], *, notes: list[str], written: Path | None
) -> dict[str, object]:
    """`bench import --json`: each row (the CSV's columns, counts and measured values as the numbers its
    cells print, an empty cell null), each file's format (servingresult.ServingResult.tool) with its
    completed and failed requests, the notes, and the CSV written (null: none)."""

    def typed(column: str, cell: str) -> object:
        if cell == "" and column in (*INT_COLUMNS, *FLOAT_COLUMNS):
            return None
        return int(cell) if column in INT_COLUMNS else float(cell) if column in FLOAT_COLUMNS else cell

    return {
        "rows": [{column: typed(column, cell) for column, cell in row.items()} for row, _ in imported],
        "files": [
            {
                "path": result.where,
                "format": result.tool,
                "completed_requests": result.requests,
                "failed_requests": result.failed_requests,
            }
            for _, result in imported
        ],
        "notes": notes,
        "written": None if written is None else str(written),
    }
