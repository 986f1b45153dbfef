"""Checkpoint evidence from safetensors headers: exact weight bytes and parameters per dtype and group.

Reads only each file's header (u64 length + JSON), never tensor data and without the safetensors library,
and sets the totals against the planner's geometry count (params.parameter_count).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError, model_validator

from planner import params, readers
from planner.errors import DataFileError
from planner.schema import Frozen, ModelCard

HEADER_LENGTH_BYTES = 8  # safetensors: u64 little-endian header size, then the JSON header
MAX_HEADER_BYTES = 100_000_000  # [datasheet: safetensors format spec, header limited to 100 MB]
# Trailing name parts of quantization side tensors (FP8 block scales, GPTQ/AWQ zeros): not model parameters.
SCALE_SUFFIXES = ("weight_scale_inv", "weight_scale", "input_scale", "scales", "qzeros", "g_idx")
VISION_PARTS = ("visual", "vision_tower", "vision_model", "multi_modal_projector")
_LAYER_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.")


class TensorTotals(Frozen):
    """Tensors, parameters (elements) and exact stored bytes of a set of tensors."""

    tensors: int = 0
    parameters: int = 0
    weight_bytes: int = 0


MAX_TENSOR_ELEMENTS = 2**48  # [assumed: 1000x the largest tensor of any released checkpoint (~1e11)]
Dimension = Annotated[int, Field(ge=0, le=MAX_TENSOR_ELEMENTS)]
Offset = Annotated[int, Field(ge=0, le=2**63)]


class TensorEntry(Frozen):
    """One tensor of a safetensors header: dtype name, shape, [begin, end) byte offsets in the data block."""

    dtype: str
    shape: list[Dimension] = Field(max_length=16)
    data_offsets: tuple[Offset, Offset]

    @model_validator(mode="after")
    def _plausible(self) -> TensorEntry:
        if math.prod(self.shape) > MAX_TENSOR_ELEMENTS:
            raise ValueError(f"shape {self.shape} has more than {MAX_TENSOR_ELEMENTS} elements")
        if self.data_offsets[1] < self.data_offsets[0]:
            raise ValueError(f"data_offsets {list(self.data_offsets)} end before they begin")
        return self


def safetensors_header(path: Path) -> dict[str, TensorEntry]:
    """The tensors of one safetensors file, from its header alone (no tensor data is read).

    Layout: u64 little-endian N, N bytes of JSON {name: {dtype, shape, data_offsets}} (and __metadata__),
    then the data block; the file must be long enough to reach every tensor's end offset.
    """
    with readers.open_regular(path) as f:
        prefix = f.read(HEADER_LENGTH_BYTES)
        if prefix == b"version ":  # "version https://git-lfs.github.com/spec/v1 ..."
            raise DataFileError(
                f"{path}: a Git LFS pointer, not weights (got a pointer file, expected "
                f"safetensors); run `git lfs pull` or download the file"
            )
        if len(prefix) < HEADER_LENGTH_BYTES:
            raise DataFileError(f"{path}: not a safetensors file (got {len(prefix)} bytes, expected >= 8)")
        header_bytes = int.from_bytes(prefix, "little")
        if header_bytes > MAX_HEADER_BYTES:
            raise DataFileError(
                f"{path}: implausible header length (got {header_bytes}, expected <= "
                f"{MAX_HEADER_BYTES}); not a safetensors file?"
            )
        raw = f.read(header_bytes)
        size = os.fstat(f.fileno()).st_size
    try:
        header = readers.json_object(raw, where=f"{path}: header")
    except DataFileError as exc:
        detail = str(exc).removeprefix(f"{path}: header: ")
        message = f"{path}: header is not a JSON object ({detail}); not a safetensors file?"
        raise DataFileError(message) from exc
    header.pop("__metadata__", None)
    try:
        entries = {name: TensorEntry.model_validate(entry) for name, entry in header.items()}
    except ValidationError as exc:
        raise DataFileError(
            f"{path}: malformed tensor entry ({exc.errors()[0]['msg']}; expected dtype, "
            f"shape and data_offsets [begin, end])"
        ) from exc
    data_end = max((e.data_offsets[1] for e in entries.values()), default=0)
    needed = HEADER_LENGTH_BYTES + header_bytes + data_end
    if size < needed:
        raise DataFileError(
            f"{path}: file is truncated (got {size} bytes, expected >= {needed}); incomplete download?"
        )
    return entries


def tensor_group(name: str, *, num_hidden_layers: int) -> str:
    """Which part of the checkpoint a tensor belongs to: scale, vision, mtp or text.

    mtp: names under `mtp.` (Qwen) or decoder layers with index >= num_hidden_layers (DeepSeek's layer 61).
    """
    parts = name.split(".")
    if parts[-1] in SCALE_SUFFIXES:
        return "scale"
    if any(part in VISION_PARTS for part in parts):
        return "vision"
    layer = _LAYER_RE.search(name)
    beyond_decoder = layer is not None and int(layer.group(1)) >= num_hidden_layers
    return "mtp" if parts[0] == "mtp" or ".mtp." in name or beyond_decoder else "text"


class CheckpointSummary(Frozen):
    """Totals over every *.safetensors file of a directory, from headers only."""

    files: list[str]
    by_dtype: dict[str, TensorTotals]
    by_group: dict[str, TensorTotals]
    missing_shards: list[str] = Field(default_factory=list)

    def group(self, name: str) -> TensorTotals:
        """Totals of one group (text, mtp, vision, scale); zeros when the checkpoint has none."""
        return self.by_group.get(name, TensorTotals())


def _add(totals: dict[str, TensorTotals], key: str, *, parameters: int, weight_bytes: int) -> None:
    old = totals.get(key, TensorTotals())
    totals[key] = TensorTotals(
        tensors=old.tensors + 1,
        parameters=old.parameters + parameters,
        weight_bytes=old.weight_bytes + weight_bytes,
    )


def checkpoint_summary(directory: Path, *, num_hidden_layers: int) -> CheckpointSummary | None:
    """Per-dtype and per-group totals of the safetensors files in `directory`; None when there are none."""
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        return None
    by_dtype: dict[str, TensorTotals] = {}
    by_group: dict[str, TensorTotals] = {}
    for path in files:
        for name, entry in safetensors_header(path).items():
            elements = math.prod(entry.shape)
            stored = entry.data_offsets[1] - entry.data_offsets[0]
            _add(by_dtype, entry.dtype, parameters=elements, weight_bytes=stored)
            _add(
                by_group,
                tensor_group(name, num_hidden_layers=num_hidden_layers),
                parameters=elements,
                weight_bytes=stored,
            )
    return CheckpointSummary(
        files=[p.name for p in files],
        by_dtype=by_dtype,
        by_group=by_group,
        missing_shards=missing_shards(directory, present={p.name for p in files}),
    )


def missing_shards(directory: Path, *, present: set[str]) -> list[str]:
    """Shards model.safetensors.index.json (if any) names that are not among `present` file names."""
    index = directory / "model.safetensors.index.json"
    if not os.path.lexists(index):
        return []
    weight_map = readers.json_object(readers.read_text_capped(index), where=str(index)).get("weight_map", {})
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise DataFileError(
            f"{index}: weight_map: not a map of tensor names to file names (got a "
            f'{type(weight_map).__name__}, expected {{"name": "model-00001-of-00002.safetensors"}})'
        )
    return sorted(set(weight_map.values()) - present)


class ParameterCheck(Frozen):
    """The card's computed parameter count set against the checkpoint's text-decoder tensors."""

    geometry_parameters: int
    checkpoint_parameters: int
    geometry_mtp_parameters: int
    checkpoint_mtp_parameters: int

    @property
    def difference_parameters(self) -> int:
        """checkpoint - geometry (text decoder, MTP excluded); 0 when the card matches the weights."""
        return self.checkpoint_parameters - self.geometry_parameters


def parameter_check(card: ModelCard, summary: CheckpointSummary) -> ParameterCheck:
    """Compare params.parameter_count(card) with the checkpoint's text (and MTP) parameters."""
    geometry = params.parameter_count(card)
    return ParameterCheck(
        geometry_parameters=geometry,
        checkpoint_parameters=summary.group("text").parameters,
        geometry_mtp_parameters=params.parameter_count(card, include_mtp=True) - geometry,
        checkpoint_mtp_parameters=summary.group("mtp").parameters,
    )
