"""`kvplan models` and `kvplan cards`: the catalogue listings (model cards, hardware profiles) as rich tables
or JSON. No formulas; the plan's own rendering is planner/cli/render.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from rich.table import Table

from planner import catalog, params, units
from planner.cli.render import console
from planner.schema import ModelCard

Row = dict[str, object]
Columns = tuple[tuple[str, ...], Callable[[Row], tuple[str, ...]]]


def model_rows() -> list[Row]:
    """One summary row per catalogued model card."""
    return [_model_row(catalog.load_model(model_id)) for model_id in catalog.model_ids()]


def _model_row(card: ModelCard) -> Row:
    return {
        "id": card.id,
        "aliases": card.aliases,
        "attention": card.attention,
        "layers": card.num_hidden_layers,
        "kv_layers": card.full_attention_layers,
        "parameters": params.parameter_count(card),
        "moe": card.is_moe,
        "hf_repo": card.source.hf_repo,
    }


def _model_cells(row: Row) -> tuple[str, ...]:
    billions = units.fmt_billions(float(str(row["parameters"])))
    return (
        str(row["id"]),
        ", ".join(row["aliases"]) if isinstance(row["aliases"], list) else "",
        str(row["attention"]) + (" moe" if row["moe"] else ""),
        f"{row['layers']} ({row['kv_layers']})",
        billions,
        str(row["hf_repo"]),
    )


def _print_rows(rows: list[Row], *, as_json: bool, title: str, columns: Columns) -> None:
    """Catalogue rows as JSON, or as a table of `columns`: (header, row -> cells)."""
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    headers, cells = columns
    table = Table(title=title)
    for column in headers:
        table.add_column(column)
    for row in rows:
        table.add_row(*cells(row))
    console.print(table)


def print_models(*, as_json: bool) -> None:
    """List model cards as a table or JSON."""
    headers = ("id", "aliases", "attention", "layers (KV)", "params", "source")
    _print_rows(
        model_rows(), as_json=as_json, title="Model cards (modelcards/)", columns=(headers, _model_cells)
    )


def profile_engines() -> dict[str, str]:
    """Engine -> the engine whose fitted card profile it reads (engines/registry.fitted_profile_engine)."""
    from planner.engines import registry
    from planner.kinds import ENGINES

    return {engine: registry.fitted_profile_engine(engine) for engine in ENGINES}


def card_rows() -> list[Row]:
    """One row per card variant (SKU) of every catalogued profile (one row for a profile without variants):
    nominal and runtime-visible memory, datasheet fields, and whether it is the profile's default."""
    rows: list[Row] = []
    for card_id in catalog.card_ids():
        hw = catalog.load_card(card_id)
        status = catalog.calibration_by_engine(hw.id, profile_engine=profile_engines())
        calibrated = any(text.startswith("calibrated") for text in status.values())
        for variant in [hw.with_variant(v.id) for v in hw.variants] or [hw]:
            visible = variant.visible_memory_bytes
            rows.append(
                {
                    "id": variant.variant_id,
                    "profile": hw.id,
                    "default": variant.variant_id == hw.variant_id,
                    "variants": len(hw.variants),
                    "name": next((v.name for v in hw.variants if v.id == variant.variant), hw.name),
                    "memory_capacity_gib": variant.memory_capacity_gib,
                    "visible_memory_bytes": visible,
                    "memory_bandwidth_gb_per_s": hw.memory_bandwidth_gb_per_s,
                    "peak_tflop_per_s": hw.peak_tflop_per_s,
                    "native_dtypes": hw.native_dtypes,
                    "calibrated": calibrated,
                    "calibration": status,
                }
            )
    return rows


def _source_kind(status: str) -> str:
    """datasheet / fitted / measured for one HardwareProfile.calibration_status line."""
    if status.startswith("uncalibrated"):
        return "datasheet"
    return "fitted" if "published" in status else "measured"


def calibration_cell(status: dict[str, str]) -> str:
    """Engines grouped by the kind of source their plans use: 'fitted: mindie, vllm; datasheet: transformers'
    (fitted = calibrated from published serving results, measured = `kvplan calibrate` on the card)."""
    kinds: dict[str, list[str]] = {}
    for engine, text in status.items():
        kinds.setdefault(_source_kind(text), []).append(engine)
    if len(kinds) == 1:
        return next(iter(kinds))
    return "; ".join(f"{kind}: {', '.join(engines)}" for kind, engines in kinds.items())


def _card_cells(row: Row) -> tuple[str, ...]:
    peaks = row["peak_tflop_per_s"]
    peak_text = ", ".join(f"{k} {v:g}" for k, v in peaks.items()) if isinstance(peaks, dict) else ""
    dtypes = row["native_dtypes"]
    visible = row["visible_memory_bytes"]
    several = isinstance(row["variants"], int) and row["variants"] > 1
    # the variant a bare profile id names (--card ascend-950pr means ascend-950pr-112g)
    default = f" (= {row['profile']})" if row["default"] and row["id"] != row["profile"] and several else ""
    return (
        f"{row['id']}{default}",
        f"{row['memory_capacity_gib']:g} GiB",
        units.fmt_gib(visible) if isinstance(visible, int) else "not known",
        f"{row['memory_bandwidth_gb_per_s']:g} GB/s",
        peak_text,
        ", ".join(dtypes) if isinstance(dtypes, list) else "",
        calibration_cell(row["calibration"]),  # type: ignore[arg-type]
    )


def print_cards(*, as_json: bool) -> None:
    """List hardware profiles as a table or JSON."""
    headers = (
        "id (--card)",
        "nominal",
        "runtime-visible",
        "bandwidth",
        "dense peak TFLOP/s",
        "dtypes",
        "speeds from (by --engine)",
    )
    _print_rows(
        card_rows(), as_json=as_json, title="Hardware profiles (hwprofiles/)", columns=(headers, _card_cells)
    )
    if not as_json:
        from planner.inputs import DEFAULT_CARD

        console.print(
            f"(= id): the variant that bare id names; kvplan's default --card is {DEFAULT_CARD}. An A3 "
            "(910C) row is one die of the two in a package."
        )
