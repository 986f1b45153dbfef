"""Every committed model card and hardware profile validates; malformed files fail with file and field named.

Parametrized over the catalogue (planner.catalog), so a new YAML file is tested without editing this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner import catalog
from planner.errors import DataFileError
from planner.schema import HardwareProfile, ModelCard

CONFIDENCE_MARKS = {"P", "S", "D", "NF"}

# Ids the catalogue must provide (the list, plus the two seed examples).
REQUIRED_MODEL_IDS = [
    "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b",
    "qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3.5-0.8b", "qwen3.5-27b", "qwen3-next-80b-a3b",
    "deepseek-v3", "llama-3.1-8b", "llama-3.1-70b",
]  # fmt: skip
REQUIRED_CARD_IDS = [
    "ascend-950pr", "ascend-950dt", "ascend-910b1", "ascend-910b2", "ascend-910b3", "ascend-910b4",
    "ascend-910c", "atlas-300i-duo", "nvidia-h100", "nvidia-h200", "nvidia-a100-80g", "nvidia-l40s",
]  # fmt: skip
# No FP8 hardware: Atlas A2/A3 and 310P op docs list int8/fp16/bf16 only (facts file 2.1, P); Ampere has none.
CARDS_WITHOUT_FP8 = [
    "ascend-910b1", "ascend-910b2", "ascend-910b3", "ascend-910b4", "ascend-910c", "atlas-300i-duo",
    "nvidia-a100-80g",
]  # fmt: skip

MODEL_IDS = catalog.model_ids()
CARD_IDS = catalog.card_ids()


def _raw(package: str, item_id: str) -> dict[str, Any]:
    return catalog.read_yaml(catalog.data_dir(package) / f"{item_id}.yaml")


def _write(path: Path, raw: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def _subject(path: Path) -> str:
    """Start of every DataFileError message about this file: the path, then ': '."""
    return "^" + re.escape(f"{path}: ")


# ---------------------------------------------------------------- committed files


def test_catalogue_is_not_empty() -> None:
    assert MODEL_IDS
    assert CARD_IDS


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_model_card_validates_and_id_is_stem(model_id: str) -> None:
    card = catalog.load_model(model_id)
    assert isinstance(card, ModelCard)
    assert card.id == model_id


@pytest.mark.parametrize("card_id", CARD_IDS)
def test_hardware_profile_validates_and_id_is_stem(card_id: str) -> None:
    profile = catalog.load_card(card_id)
    assert isinstance(profile, HardwareProfile)
    assert profile.id == card_id


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_model_card_sources_have_confidence_marks(model_id: str) -> None:
    sources = catalog.load_model(model_id).sources
    assert sources
    assert {s.confidence for s in sources} <= CONFIDENCE_MARKS


@pytest.mark.parametrize("card_id", CARD_IDS)
def test_hardware_profile_sources_have_confidence_marks(card_id: str) -> None:
    sources = catalog.load_card(card_id).sources
    assert sources
    assert {s.confidence for s in sources} <= CONFIDENCE_MARKS


@pytest.mark.parametrize("model_id", REQUIRED_MODEL_IDS)
def test_required_model_card_exists(model_id: str) -> None:
    assert model_id in MODEL_IDS


@pytest.mark.parametrize("card_id", REQUIRED_CARD_IDS)
def test_required_hardware_profile_exists(card_id: str) -> None:
    assert card_id in CARD_IDS


@pytest.mark.parametrize("card_id", CARDS_WITHOUT_FP8)
def test_cards_without_fp8_do_not_list_it(card_id: str) -> None:
    profile = catalog.load_card(card_id)
    assert "fp8" not in profile.native_dtypes
    assert "fp8" not in profile.peak_tflop_per_s
    assert "fp8" not in profile.default_coefficients.compute_fraction


# ---------------------------------------------------------------- aliases


def _alias_pairs() -> list[tuple[str, str]]:
    return [(alias, model_id) for model_id in MODEL_IDS for alias in catalog.load_model(model_id).aliases]


@pytest.mark.parametrize(("alias", "model_id"), _alias_pairs())
def test_alias_resolves_to_its_card(alias: str, model_id: str) -> None:
    card, typed_alias = catalog.resolve_model(alias)
    assert card.id == model_id
    assert typed_alias == alias


def test_aliases_do_not_collide_with_ids_or_each_other() -> None:
    aliases = [alias for alias, _ in _alias_pairs()]
    assert not set(aliases) & set(MODEL_IDS)
    assert len(aliases) == len(set(aliases))


# ---------------------------------------------------------------- malformed files


def _rename(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    return lambda raw: raw.update({new: raw.pop(old)})


def _set(*path: str | int, value: object) -> Callable[[dict[str, Any]], None]:
    def mutate(raw: dict[str, Any]) -> None:
        target: Any = raw
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


# (folder, item id, file stem, mutation, what the one-line error must say after "<path>: ")
MALFORMED = {
    "extra key": (
        "modelcards",
        "qwen3-8b",
        "qwen3-8b",
        _set("intermediate_sizes", value=12288),  # misspelling of intermediate_size, next to the real key
        r"intermediate_sizes: Extra inputs are not permitted",
    ),
    "misspelled key": (
        "modelcards",
        "qwen3-8b",
        "qwen3-8b",
        _rename("hidden_size", "hiden_size"),
        r"(hidden_size|hiden_size): ",
    ),
    "misspelled hardware key": (
        "hwprofiles",
        "nvidia-h100",
        "nvidia-h100",
        _rename("memory_bandwidth_gb_per_s", "memory_bandwidth_gbps"),
        r"(memory_bandwidth_gb_per_s|memory_bandwidth_gbps): ",
    ),
    "negative peak": (
        "hwprofiles",
        "nvidia-h100",
        "nvidia-h100",
        _set("peak_tflop_per_s", "bf16", value=-989),
        r"peak_tflop_per_s\.bf16 must be > 0 \(got -989",
    ),
    "negative bandwidth": (
        "hwprofiles",
        "ascend-910b2",
        "ascend-910b2",
        _set("memory_bandwidth_gb_per_s", value=-1600),
        r"memory_bandwidth_gb_per_s: .*greater than 0",
    ),
    "heads not divisible": (
        "modelcards",
        "llama-3.1-8b",
        "llama-3.1-8b",
        _set("num_key_value_heads", value=5),  # 32 query heads are not a multiple of 5
        r"num_attention_heads must be a multiple of num_key_value_heads \(got 32 and 5\)",
    ),
    "id not stem": (
        "modelcards",
        "qwen3-8b",
        "qwen3-8b-copy",
        _set("id", value="qwen3-8b"),
        r"id: must equal the file stem \(got 'qwen3-8b', expected 'qwen3-8b-copy'\)",
    ),
    "bad confidence mark": (
        "hwprofiles",
        "nvidia-l40s",
        "nvidia-l40s",
        _set("sources", 0, "confidence", value="maybe"),
        r"sources\.0\.confidence: ",
    ),
    "empty sources": ("modelcards", "deepseek-v3", "deepseek-v3", _set("sources", value=[]), r"sources: "),
    "prior factor of 1 (no uncertainty at all)": (
        "hwprofiles",
        "ascend-910c",
        "ascend-910c",
        _set("default_coefficients", "compute_fraction_prior_factor", value=1.0),
        r"default_coefficients\.compute_fraction_prior_factor: ",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_file_names_file_and_field(tmp_path: Path, case: str) -> None:
    folder, item_id, stem, mutate, expected = MALFORMED[case]
    raw = _raw(folder, item_id)
    mutate(raw)
    path = _write(tmp_path / f"{stem}.yaml", raw)
    model: type[ModelCard] | type[HardwareProfile] = ModelCard if folder == "modelcards" else HardwareProfile
    with pytest.raises(DataFileError, match=_subject(path) + expected):
        catalog.load_item(path, model)
