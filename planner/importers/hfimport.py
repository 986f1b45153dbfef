"""Hugging Face config.json -> ModelCard (offline).

`card_from_config_dict` maps a config dict (Qwen3, Qwen3-MoE, Qwen3-Next, Qwen3.5, Llama, DeepSeek-V3 / V3.2,
Kimi-K2, GLM-5 (glm_moe_dsa), MiniMax-M2) onto the card schema, names unchanged where the card has them
(DeepSeek-V3.2's and GLM-5's index_* keys included; MiniMax-M2's expert keys are renamed, see
hffamilies._minimax_m2). The per-family
mappings live in planner/importers/hffamilies.py; checkpoint evidence (safetensors headers) in
planner/importers/checkpoint.py.
"""

from __future__ import annotations

import datetime
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from planner import __version__, readers
from planner.errors import DataFileError
from planner.importers.hffamilies import FAMILIES, TextConfig, text_model_config
from planner.schema import ATTENTION_KINDS, AttentionKind, ModelCard

CARD_ID_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")  # as ModelCard.id
# model_type values whose attention is DeepSeek MLA (Kimi-K2 is the DeepSeek-V3 architecture; GLM-5's
# glm_moe_dsa is DeepSeek-V3.2's).
MLA_MODEL_TYPES = ("deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa")


def attention_kind(fields: Mapping[str, Any], *, model_type: str) -> AttentionKind:
    """Card `attention`: mla (DeepSeek); hybrid with linear-attention layers; else mha/gqa by head counts."""
    if model_type in MLA_MODEL_TYPES:
        return "mla"
    layer_types = fields.get("layer_types")
    if fields.get("linear_num_key_heads") and ("linear_attention" in (layer_types or ["linear_attention"])):
        return "hybrid"
    return "mha" if fields["num_attention_heads"] == fields["num_key_value_heads"] else "gqa"


def import_sources(cfg: TextConfig, *, origin: str, date: str) -> list[dict[str, Any]]:
    """The imported card's sources: the config file (P), and the values kvplan supplied (D) where any."""
    sources: list[dict[str, Any]] = [
        {"ref": f"{origin} (imported by kvplan {__version__} on {date})", "confidence": "P"}
    ]
    if cfg.derived:
        sources.append(
            {
                "ref": "kvplan models import: values not in config.json",
                "confidence": "D",
                "fields": sorted(cfg.derived),
                "note": "; ".join(cfg.derived.values()),
            }
        )
    return sources


def card_from_config_dict(
    config: Mapping[str, Any], *, card_id: str, origin: str = "config.json", imported_on: str | None = None
) -> ModelCard:
    """A validated ModelCard from a Hugging Face config dict; errors name `origin` and the config field.

    origin names the file in messages and in `sources`; imported_on (ISO date) defaults to today.
    """
    cfg = text_model_config(config, origin)
    fields = FAMILIES[cfg.model_type](cfg)
    attention = attention_kind(fields, model_type=cfg.model_type)
    if not ATTENTION_KINDS[attention].linear_layers:
        fields = {
            k: v
            for k, v in fields.items()
            if not k.startswith("linear_") and k not in ("layer_types", "full_attention_interval")
        }
    refuse_text_numbers(fields, origin=origin, prefix=cfg.prefix)
    hf_repo = str(config.get("_name_or_path") or "local")
    raw_card = {
        "id": card_id,
        "name": hf_repo.rstrip("/").split("/")[-1] if hf_repo != "local" else card_id,
        "source": {"hf_repo": hf_repo},
        "sources": import_sources(cfg, origin=origin, date=imported_on or datetime.date.today().isoformat()),
        "model_type": cfg.model_type,
        "attention": attention,
        **{k: v for k, v in fields.items() if v is not None},
        # a multimodal config (its text model under text_config, or a vision_config beside it): the card is
        # the text decoder, and the plan says the vision tower is not counted
        "vision_tower_uncounted": bool(cfg.prefix) or isinstance(config.get("vision_config"), Mapping),
        # auto_map names the checkpoint's own classes: loading it runs their code
        "trust_remote_code": isinstance(config.get("auto_map"), Mapping),
    }
    try:
        return ModelCard.model_validate(raw_card)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        where = f"{cfg.prefix}{loc}: " if loc.split(".")[0] in fields else f"{loc}: " if loc else ""
        message = first["msg"].removeprefix("Value error, ")
        stated = isinstance(first.get("input"), dict) or "(got " in message  # the message quotes it already
        got = "" if stated else f" (got {first.get('input')!r:.80})"
        raise DataFileError(f"{origin}: {where}{message}{got}") from exc


def _numeric(annotation: Any) -> bool:
    """Whether a card field's type holds numbers (int / float, bare, optional, constrained or in a list)."""
    return annotation in (int, float) or any(_numeric(arg) for arg in typing.get_args(annotation))


def refuse_text_numbers(fields: Mapping[str, Any], *, origin: str, prefix: str) -> None:
    """DataFileError for a config.json number written as a JSON string ("32"): transformers keeps it a
    string, so no engine would load the checkpoint; the card schema alone would read it as 32."""
    for key, value in fields.items():
        info = ModelCard.model_fields.get(key)
        if isinstance(value, str) and info is not None and _numeric(info.annotation):
            raise DataFileError(
                f"{origin}: {prefix}{key}: a number written as text (got {value!r:.80}, expected a JSON "
                "number, as transformers writes it)"
            )


def card_yaml(card: ModelCard) -> str:
    """The card as YAML in schema field order, without defaulted fields (schema_version kept)."""
    dumped = card.model_dump(mode="json", exclude_defaults=True)
    always = {
        "schema_version": card.schema_version,
        "torch_dtype": card.torch_dtype,
        "attention_bias": card.attention_bias,
    }
    ordered = {k: dumped.get(k, always.get(k)) for k in ModelCard.model_fields if k in dumped or k in always}
    return str(yaml.safe_dump(ordered, sort_keys=False, default_flow_style=None, width=110))


def config_path_of(path: Path) -> Path:
    """`path` itself when it is not a directory, else `path`/config.json; DataFileError when that does not
    exist (one that is no regular file, a FIFO or a device, is refused by read_config's reader)."""
    try:
        candidate = path / "config.json" if path.is_dir() else path
        found = candidate.exists()
    except OSError as exc:  # a name too long for the file system (ENAMETOOLONG), a loop
        raise DataFileError(f"{str(path)[:200]}...: cannot read ({exc.strerror})") from exc
    if not found:
        raise DataFileError(
            f"{candidate}: config file not found (got {str(path)!r}, expected a directory "
            f"holding config.json, or the config.json file itself)"
        )
    return candidate


def default_card_id(config: Mapping[str, Any], *, fallback: str = "", default: str = "imported-model") -> str:
    """Kebab-case id from the last part of `_name_or_path` (else of `fallback`), else `default`."""
    name = str(config.get("_name_or_path") or fallback).rstrip("/").split("/")[-1]
    slug = re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-.")
    return slug or default


def read_config(path: Path) -> dict[str, Any]:
    """Parse a config.json into a dict; DataFileError names the file."""
    return readers.json_object(readers.read_text_capped(path), where=str(path))
