"""Uploaded files in the dashboard: saved under a per-session scratch folder, then read like any other file.

Pure: no streamlit. The planner validates what is read (catalog.load_item, planner.importers.hfimport).
"""

from __future__ import annotations

import functools
import hashlib
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from planner import catalog
from planner.schema import ModelCard

ModelT = TypeVar("ModelT", bound=BaseModel)

UPLOADED_MODEL_ID = "uploaded-model"


@functools.cache
def process_upload_dir() -> tempfile.TemporaryDirectory[str]:
    """Fallback scratch folder for uploads when the caller passes none; removed when the process exits."""
    return tempfile.TemporaryDirectory(prefix="kvplan-uploads-")


def save_upload(data: bytes, *, name: str, directory: Path | None = None) -> Path:
    """Write uploaded bytes under a content-addressed folder, keeping the user's file name for messages.

    `directory` is the caller's scratch folder (the dashboard passes one per browser session, deleted with
    it); without one, a temporary folder of this process. The planner then reads the file like any other
    (catalog.resolve_card / resolve_model take paths).
    """
    digest = hashlib.sha256(data).hexdigest()[:16]
    root = directory if directory is not None else Path(process_upload_dir().name)
    path = root / digest / (Path(name).name or "upload")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


def load_uploaded(data: bytes, model: type[ModelT], *, name: str, directory: Path | None = None) -> ModelT:
    """Validate an uploaded data file (e.g. a calibrated hardware profile) with catalog.load_item."""
    return catalog.load_item(save_upload(data, name=name, directory=directory), model, check_stem=False)


def model_card_from_config(data: bytes, *, name: str, directory: Path | None = None) -> ModelCard:
    """A ModelCard from an uploaded Hugging Face config.json (planner.importers.hfimport; errors name the
    file)."""
    from planner.importers import hfimport

    config = hfimport.read_config(save_upload(data, name=name, directory=directory))
    card_id = hfimport.default_card_id(config, default=UPLOADED_MODEL_ID)
    return hfimport.card_from_config_dict(config, card_id=card_id, origin=name)


def model_card_path(card: ModelCard, *, directory: Path | None = None) -> str:
    """A YAML file holding `card`, usable as PlanRequest.model (catalog.resolve_model reads card paths)."""
    from planner.importers import hfimport

    text = hfimport.card_yaml(card).encode("utf-8")
    return str(save_upload(text, name=f"{card.id}.yaml", directory=directory))
