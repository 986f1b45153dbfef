"""The Deployment a bench row describes (planner/importers/benchpoints.py reads the rows): its model card
(catalogue id, alias or Hugging Face repo name) and hardware profile resolved, the row's fields on top, and
every error one line naming the row.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from planner import catalog, support
from planner.deployment import Deployment
from planner.dtypes import storage_dtype
from planner.errors import DataFileError, KvplanError, UnknownIdError
from planner.importers.benchpoints import BenchPoint
from planner.schema import HardwareProfile, ModelCard


def catalogue_model(name: str) -> tuple[ModelCard, str | None]:
    """Model card for a bench row's model: catalogue id, alias or Hugging Face repo name
    (catalog.resolve_model); an unknown repo name is an unknown model (not a missing file), closest ids."""
    try:
        return catalog.resolve_model(name)
    except KvplanError as exc:
        if "/" in name and Path(name).suffix not in (".yaml", ".yml"):
            raise UnknownIdError("model card", name, catalog.model_ids(), "modelcards/") from exc
        raise


def row_error(where: str, exc: ValidationError) -> DataFileError:
    """One line for a row a schema refused: the row, the first failing field, its limit and the value."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"])
    value = first.get("input")
    got = f" (got {value!r})" if isinstance(value, (int, float, str)) else ""
    return DataFileError(f"{where}: {field}: {first['msg'].removeprefix('Value error, ')}{got}")


RowFields = Callable[[HardwareProfile], dict[str, object]]


def row_deployment(
    where: str,
    *,
    model: str,
    card: str,
    hardware: HardwareProfile | None,
    calibrated: bool,
    fields: RowFields,
) -> Deployment:
    """The Deployment a bench row ran: its model (catalogue_model) and card resolved (`hardware` overrides the
    card when given), then `fields(card profile)` on top (they may replace "hardware"); every error (unknown
    model or card, a value the schema refuses, does not fit) is one line naming the row at `where`."""
    try:
        card_model, alias = catalogue_model(model)
        hw = hardware if hardware is not None else catalog.resolve_card(card)
        base: dict[str, object] = {"model": card_model, "hardware": hw, "model_alias": alias}
        dep = Deployment(**(base | {"calibrated": calibrated} | fields(hw)))
        support.check_tp(dep)  # the row's tp as the plan checks it: every head count it must shard
        return dep
    except KvplanError as exc:
        raise DataFileError(f"{where}: {exc}") from exc
    except ValidationError as exc:
        raise row_error(where, exc) from exc


def deployment_for(
    point: BenchPoint, *, hardware: HardwareProfile | None = None, calibrated: bool = True
) -> Deployment:
    """The Deployment a point ran (hardware overrides the point's card when given); errors name the point."""
    step = {"weight_scheme_name": point.dtype, "kv_dtype": storage_dtype(point.kv_dtype), "tp": point.tp}
    step |= {"ctx_tokens": point.ctx_tokens, "batch": point.batch, "engine": point.engine}
    return row_deployment(
        point.where, model=point.model, card=point.card, hardware=hardware, calibrated=calibrated,
        fields=lambda _hw: dict(step),
    )  # fmt: skip
