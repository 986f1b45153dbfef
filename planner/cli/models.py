"""`kvplan models import`: a local Hugging Face config.json (plus safetensors headers) -> a model card YAML.

Parse -> call planner.importers.hfimport -> format. The card YAML goes to stdout (report on stderr) unless
--out is given; --out is written atomically (temp file + os.replace) and never overwritten without --force.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from planner import units
from planner.cli.options import FlagCommand, JsonOpt, fail, print_json
from planner.errors import KvplanError, PlanInputError
from planner.records import record

# planner.importers.hfimport is imported when the command runs, so `kvplan --help` stays light
if TYPE_CHECKING:
    from planner.importers import checkpoint, quantization
    from planner.schema import ModelCard


def register(models_app: typer.Typer) -> None:
    """Add the `import` command to the `kvplan models` sub-app."""
    models_app.command("import", cls=FlagCommand)(import_card)


def import_card(
    source: Annotated[Path, typer.Argument(help="Checkpoint directory holding config.json, or the file.")],
    card_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            help="Card id (default: the --out file's stem when it is a valid id, else the last part of "
            "config.json's _name_or_path, else the source directory's name, in kebab-case).",
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the card here (default: stdout).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Turn a local config.json into a model card, checked against safetensors headers when present."""
    from planner.importers import hfimport

    try:
        imported = build_card(source, card_id=resolve_id(card_id, out=out))
        text = hfimport.card_yaml(imported.card)
        if out is not None:  # never over the config.json it read, --force or not
            write_text_atomic(out, text, force=force, inputs={"the source config": Path(imported.origin)})
        if as_json:
            return print_json(card_json(text, imported, out=out))
        if out is None:
            sys.stdout.write(text)
        for line in report_lines(imported, out=out):
            typer.echo(line, err=out is None)
    except KvplanError as exc:
        fail(exc)


def resolve_id(card_id: str | None, *, out: Path | None) -> str | None:
    """--id if given (validated), else the --out file stem when it is a valid id, else None (derived)."""
    from planner.importers import hfimport

    if card_id is not None:
        if not hfimport.CARD_ID_RE.match(card_id):
            raise PlanInputError(
                f"--id: must be lowercase kebab-case (got {card_id!r}, "
                f"expected [a-z0-9][a-z0-9.-]*, e.g. qwen3-8b)"
            )
        return card_id
    if out is not None and hfimport.CARD_ID_RE.match(out.stem):
        return out.stem
    return None


@record
class ImportedCard:
    """A card built from config.json, with the evidence beside it for the report.

    summary, check    the safetensors headers' totals and their comparison (None: no *.safetensors)
    listed_missing    shards model.safetensors.index.json names that are absent (with no *.safetensors)
    quantization      what the config (or msModelSlim's description) says of quantized weights
    origin            the config.json path, as messages name it
    """

    card: ModelCard
    summary: checkpoint.CheckpointSummary | None
    check: checkpoint.ParameterCheck | None
    listed_missing: list[str]
    quantization: quantization.CheckpointQuantization | None
    origin: str


def card_json(text: str, imported: ImportedCard, *, out: Path | None) -> dict[str, object]:
    """`models import --json`: the card (the YAML's own fields and values), the safetensors evidence (null
    without it: per dtype and per group tensors, parameters and weight bytes; the text decoder's parameter
    count from the card's geometry and in the checkpoint, difference = checkpoint - geometry; MTP alike;
    shards the index lists but the directory lacks), the report's notes, and the card written (null: none)."""
    import yaml

    card = yaml.safe_load(text)
    summary, check = imported.summary, imported.check
    evidence = None
    if summary is not None and check is not None:
        evidence = {
            **summary.model_dump(mode="json"),
            **check.model_dump(mode="json"),
            "difference_parameters": check.difference_parameters,
        }
    return {
        "card": card,
        "checkpoint": evidence,
        "notes": import_notes(imported, out=out),
        "listed_missing_shards": imported.listed_missing,  # the index names them; no *.safetensors at all
        "written": None if out is None else str(out),
    }


def import_notes(imported: ImportedCard, *, out: Path | None) -> list[str]:
    """The report's notes, without their 'note:' prefix: a card written under another file stem than its
    id (modelcards/ reads a card by its file name), and the checkpoint's quantization."""
    from planner.importers import quantization

    notes = []
    if out is not None and out.stem != imported.card.id:
        notes.append(
            f"id {imported.card.id!r} differs from the file stem {out.stem!r}; modelcards/ needs them equal"
        )
    if imported.quantization is not None:
        notes.append(
            quantization.import_note(imported.quantization, origin=imported.origin).removeprefix("note: ")
        )
    return notes


def build_card(source: Path, *, card_id: str | None) -> ImportedCard:
    """Card from `source` (directory or config.json), plus the safetensors evidence beside it and the
    checkpoint's quantization (its kvplan dtype recorded as the card's checkpoint_dtype)."""
    from planner.importers import checkpoint, hfimport, quantization

    config_path = hfimport.config_path_of(source)
    config = hfimport.read_config(config_path)
    card_id = card_id or hfimport.default_card_id(config, fallback=config_path.parent.resolve().name)
    card = hfimport.card_from_config_dict(config, card_id=card_id, origin=str(config_path))
    quant = quantization.checkpoint_quantization(config, directory=config_path.parent)
    if quant is not None and quant.dtype is not None:
        card = card.model_copy(update={"checkpoint_dtype": quant.dtype})
    summary = checkpoint.checkpoint_summary(config_path.parent, num_hidden_layers=card.num_hidden_layers)
    if summary is None:
        listed = checkpoint.missing_shards(config_path.parent, present=set())
        return ImportedCard(card, None, None, listed, quant, str(config_path))
    check = checkpoint.parameter_check(card, summary)
    card = card.model_copy(update={"notes": checkpoint_note(summary, check)})
    return ImportedCard(card, summary, check, [], quant, str(config_path))


def checkpoint_note(summary: checkpoint.CheckpointSummary, check: checkpoint.ParameterCheck) -> str:
    """One-paragraph record of the checkpoint evidence, kept in the card's `notes`."""
    dtypes = ", ".join(
        f"{d} {t.parameters:,} params / {t.weight_bytes:,} B" for d, t in summary.by_dtype.items()
    )
    return (
        f"safetensors headers ({len(summary.files)} files): {dtypes}. Text decoder: "
        f"{check.checkpoint_parameters:,} params in the checkpoint vs {check.geometry_parameters:,} from "
        f"this geometry (difference {check.difference_parameters:+,}); MTP "
        f"{check.checkpoint_mtp_parameters:,} vs {check.geometry_mtp_parameters:,}; vision tower "
        f"{summary.group('vision').parameters:,} (not in the card)."
    )


MAX_NAME_CHARS = 255  # the usual file-name limit (NAME_MAX)


def write_text_atomic(
    path: Path, text: str, *, force: bool, inputs: dict[str, Path | None] | None = None
) -> None:
    """Write `text` to `path` atomically via planner.atomic (no clobber without --force; a backup with it;
    never over one of `inputs`, the files the run read, label -> path).

    The flag-level checks come first so the messages name `--out`.
    """
    from planner import atomic

    if len(path.name) > MAX_NAME_CHARS:
        raise PlanInputError(f"--out: file name too long (got {len(path.name)} characters, expected <= 255)")
    if not path.parent.is_dir():
        raise PlanInputError(f"--out: directory does not exist (got '{path.parent}')")
    atomic.check_new({"--out": path}, force=force, inputs=inputs)  # worded as every writer's (planner.atomic)
    atomic.write_atomic(path, text, force=force)


def report_lines(imported: ImportedCard, *, out: Path | None) -> list[str]:
    """Human-readable summary: where the card went, the checkpoint's quantization and how the card compares
    with the checkpoint's weights."""
    card, summary, check = imported.card, imported.summary, imported.check
    lines = [
        f"wrote {out} (id {card.id}, {card.model_type}, attention {card.attention})"
        if out
        else f"# card {card.id}: {card.model_type}, attention {card.attention}"
    ]
    lines += [f"note: {note}" for note in import_notes(imported, out=out)]
    if imported.listed_missing:
        shards = imported.listed_missing
        return [
            *lines,
            f"warning: model.safetensors.index.json names {len(shards)} shard(s) not beside config.json: "
            f"{', '.join(shards[:5])}{', ...' * (len(shards) > 5)}; card not checked against weights",
        ]
    if summary is None or check is None:
        return [*lines, "note: no *.safetensors beside config.json: card not checked against weights"]
    lines.append(f"safetensors: {len(summary.files)} file(s), headers only")
    for dtype, totals in sorted(summary.by_dtype.items()):
        lines.append(
            f"  {dtype:<8} {totals.tensors:>6} tensors {totals.parameters:>18,} params "
            f"{totals.weight_bytes:>18,} B ({units.fmt_bytes(totals.weight_bytes)})"
        )
    lines += _comparison_lines(summary, check)
    if summary.missing_shards:
        lines.append(
            f"warning: shards listed in model.safetensors.index.json are missing: "
            f"{', '.join(summary.missing_shards)}; counts are incomplete"
        )
    return lines


def _comparison_lines(summary: checkpoint.CheckpointSummary, check: checkpoint.ParameterCheck) -> list[str]:
    diff = check.difference_parameters
    share = abs(diff) / check.geometry_parameters
    verdict = "matches" if diff == 0 else f"differs by {units.fmt_fraction(share)} of the geometry count"
    rows = (
        ("parameters from the card geometry (params.parameter_count)", f"{check.geometry_parameters:,}"),
        ("parameters in the checkpoint (text decoder)", f"{check.checkpoint_parameters:,}"),
        ("difference (checkpoint - geometry)", f"{diff:+,}  {verdict}"),
    )
    lines = [f"{label + ':':<61}{value}" for label, value in rows]
    if check.checkpoint_mtp_parameters or check.geometry_mtp_parameters:
        lines.append(
            f"MTP: checkpoint {check.checkpoint_mtp_parameters:,}, geometry "
            f"{check.geometry_mtp_parameters:,} (the card's mtp_num_hidden_layers / "
            f"num_nextn_predict_layers come from config.json only)"
        )
    for group, what in (("vision", "vision tower (not in the card)"), ("scale", "quantization scales")):
        if summary.group(group).tensors:
            lines.append(
                f"{what}: {summary.group(group).parameters:,} params, "
                f"{units.fmt_bytes(summary.group(group).weight_bytes)}"
            )
    return lines
