"""The only reader of hwprofiles/ and modelcards/: loads and validates one item per YAML file.

Ids equal file stems. A model card may list `aliases` (e.g. qwen3-27b -> qwen3.5-27b); lookups by alias
report which id they resolved to, so the CLI can say so.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from planner import catalog_cache, readers
from planner.errors import DataFileError, UnknownIdError
from planner.kinds import ENGINES
from planner.schema import HardwareProfile, ModelCard

ModelT = TypeVar("ModelT", bound=BaseModel)

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def data_dir(package: str) -> Path:
    """Directory of a data package (hwprofiles or modelcards), installed or in a checkout: the folder of its
    __init__.py. (importlib.resources.files gives the same folder, but importing it costs the mission command
    ~1 % of its start-up: zipfile, tempfile and its own readers.)"""
    init_file = importlib.import_module(package).__file__
    if init_file is None:
        raise DataFileError(f"{package}: data package has no folder (expected {package}/__init__.py)")
    return Path(init_file).parent


def _format_validation_error(path: Path, error: ValidationError) -> str:
    """One line naming the file and each failing field (unknown keys first, at most three)."""
    errors = sorted(error.errors(), key=lambda e: e["type"] != "extra_forbidden")
    parts = []
    for item in errors[:3]:
        field = ".".join(str(p) for p in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        got = item.get("input")
        got_text = "" if isinstance(got, (dict, list)) or item["type"] == "missing" else f" (got {got!r})"
        parts.append(f"{field}: {message}{got_text}" if field else f"{message}{got_text}")
    more = f"; and {len(errors) - 3} more" if len(errors) > 3 else ""
    return f"{path}: " + "; ".join(parts) + more


def read_yaml(path: Path) -> dict[str, Any]:
    """Parse a YAML mapping; DataFileError names the file when it is unreadable or not a mapping."""
    raw = readers.parse_yaml(readers.read_text_capped(path), where=str(path))
    if not isinstance(raw, dict):
        raise DataFileError(f"{path}: expected a YAML mapping at the top level (got {type(raw).__name__})")
    return raw


def load_item(path: Path, model: type[ModelT], *, check_stem: bool = True) -> ModelT:
    """Validate one data file into `model`; the id must equal the file stem when check_stem is set."""
    raw = read_yaml(path)
    try:
        item = model.model_validate(raw)
    except ValidationError as exc:
        raise DataFileError(_format_validation_error(path, exc)) from exc
    item_id = getattr(item, "id", None)
    if check_stem and item_id != path.stem:
        raise DataFileError(f"{path}: id: must equal the file stem (got {item_id!r}, expected {path.stem!r})")
    return item


@functools.cache
def _files(package: str) -> dict[str, Path]:
    return {p.stem: p for p in sorted(data_dir(package).glob("*.yaml"))}


def model_ids() -> list[str]:
    """Ids of every catalogued model card."""
    return list(_files("modelcards"))


def card_ids() -> list[str]:
    """Ids of every catalogued hardware profile."""
    return list(_files("hwprofiles"))


@functools.cache
def load_model(model_id: str) -> ModelCard:
    """The catalogued model card with this exact id."""
    return load_item(_files("modelcards")[model_id], ModelCard)


# A card's one-line `aliases: [a, b]` entry (how `kvplan models import` and the catalogue write it).
_FLOW_ALIASES = re.compile(r"^aliases:[ \t]*(\[[^\n#\]]*\])[ \t]*$", re.MULTILINE)


def _aliases(model_id: str) -> list[str]:
    """A card's `aliases`, parsed from its one-line entry alone, else from the whole file, without
    validating the card (an alias lookup then validates one card, not the catalogue); a malformed list is
    reported by validating that card."""
    path = _files("modelcards")[model_id]
    line = _FLOW_ALIASES.search(readers.read_text_capped(path))
    raw = readers.parse_yaml(line.group(1), where=str(path)) if line else read_yaml(path).get("aliases", [])
    if isinstance(raw, list) and all(isinstance(alias, str) for alias in raw):
        return raw
    return load_model(model_id).aliases


@functools.cache
def _alias_map() -> dict[str, str]:
    aliases: dict[str, str] = {}
    for model_id in model_ids():
        for alias in _aliases(model_id):
            if alias in aliases or alias in _files("modelcards"):
                raise DataFileError(
                    f"{_files('modelcards')[model_id]}: aliases: '{alias}' is already taken "
                    f"(got it in {model_id}, expected each alias once and never an id)"
                )
            aliases[alias] = model_id
    return aliases


@functools.cache
def _hf_repo_map() -> dict[str, str]:
    """Hugging Face repo names ("Qwen/Qwen3-32B", lower-cased) -> card id: each card's source.hf_repo, and
    "<org>/<id or alias>" for the org of that repo (so "deepseek-ai/DeepSeek-R1" finds deepseek-v3)."""
    repos: dict[str, str] = {}
    for model_id in model_ids():
        card = load_model(model_id)
        org = card.source.hf_repo.split("/")[0].lower() if "/" in card.source.hf_repo else ""
        repos.setdefault(card.source.hf_repo.lower(), model_id)
        for name in (model_id, *card.aliases):
            if org:
                repos.setdefault(f"{org}/{name}", model_id)
    return repos


def _path_is(check: Callable[[], bool]) -> bool:
    """A path test (`path.is_file`, `path.exists`, `path.is_dir`) that is False, not an error, when the name
    cannot be looked up at all (too long, bad bytes)."""
    try:
        return check()
    except (OSError, ValueError):
        return False


def _is_file(path: Path) -> bool:
    """True for an existing file."""
    return _path_is(path.is_file)


def _not_found(path: Path) -> str:
    """Why a card or profile path did not load: 'file not found', or what stands there instead of a file
    (a directory, a device), so `--model /tmp` is not told that /tmp does not exist."""
    if _path_is(path.is_dir):
        return "file not readable (a directory)"
    if _path_is(path.exists):
        return "file not readable (not a regular file)"
    return "file not found"


def resolve_model(name: str) -> tuple[ModelCard, str | None]:
    """Model card by id, alias, Hugging Face repo name or YAML path; returns (card, alias typed or None).

    Raises UnknownIdError with the closest ids (and aliases) when nothing matches.
    """
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or "/" in name:
        if _is_file(path):
            return load_item(path, ModelCard, check_stem=False), None
        is_yaml = path.suffix in (".yaml", ".yml")
        hf_target = None if is_yaml else _hf_repo_map().get(name.strip().lower())
        if hf_target is None:
            also = "" if is_yaml else " and no catalogued card mirrors that Hugging Face repo"
            raise DataFileError(f"--model: model card {_not_found(path)}{also} (got {name!r})")
        return load_model(hf_target), name.strip()
    key = name.strip().lower()
    return catalog_cache.remembered(
        f"model-{key}", data_files=lambda: _files("modelcards").values(), look_up=lambda: _model_by_id(name)
    )


def _model_by_id(name: str) -> tuple[ModelCard, str | None]:
    """resolve_model for a name that is no path: an id or an alias."""
    key = name.strip().lower()
    if key in _files("modelcards"):
        return load_model(key), None
    alias_target = _alias_map().get(key)
    if alias_target is not None:
        return load_model(alias_target), key
    raise UnknownIdError("model card", name, [*model_ids(), *_alias_map()], "modelcards/")


def resolve_card(
    name: str, *, engine: str | None = None, profile_engine: str | None = None
) -> HardwareProfile:
    """Hardware profile by id or by path to a profile YAML (e.g. one written by `kvplan calibrate`).

    With `engine`, a catalogued card without a measured block resolves to its profile fitted to published
    serving results (hwprofiles/fitted/<card>.<engine>.yaml) when one is shipped: `profile_engine`'s fit
    where the engine reads another's (the registry's fitted_profile_engine; default: its own), then with
    the engine's own software costs (borrowed_fit).
    """
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or _is_file(path) or ("/" in name and _path_is(path.exists)):
        if not _is_file(path):
            raise DataFileError(f"--card: profile {_not_found(path)} (got {name!r})")
        return load_item(path, HardwareProfile, check_stem=False)
    key = name.strip().lower()
    fit_engine = profile_engine or engine
    borrowed = f"-from-{fit_engine}" if fit_engine != engine else ""
    return catalog_cache.remembered(
        f"card-{key}-{engine or 'any'}{borrowed}",
        data_files=_profile_files,
        look_up=lambda: _card_by_id(name, engine=engine, fit_engine=fit_engine),
    )


def _profile_files() -> list[Path]:
    """Every file resolve_card may read for an id: each profile and each fitted profile."""
    return [*_files("hwprofiles").values(), *sorted((data_dir("hwprofiles") / "fitted").glob("*.yaml"))]


# The coefficients that are an engine's software costs rather than the chip's: a request's cost outside the
# forward pass (API server, tokenization, admission) and an eager prefill pass's launch cost. A fit of one
# engine's rows carries them for that engine only (borrowed_fit): vllm-ascend's 910C fit charges 108 ms per
# request and 100 ms per prefill pass, which put SGLang's single 4k prompt on an A3 at 530 ms against 318 ms
# measured while SGLang read them (issue 27; docs/accuracy.md).
ENGINE_SOFTWARE_COSTS = ("request_overhead_us", "prefill_pass_overhead_us")


def borrowed_fit(fitted: HardwareProfile, *, engine: str, fitted_for: str) -> HardwareProfile:
    """A profile fitted to `fitted_for`'s serving rows, as `engine` runs on the card: the fit's chip terms
    stay (bandwidth and compute fractions, kernel, step and collective costs); the costs the fitted engine's
    own software pays (ENGINE_SOFTWARE_COSTS) go back to the card's datasheet values, what kvplan assumes for
    an engine without a fit of its own. The calibration status says so. No measured block: returned as is."""
    measured = fitted.measured
    if measured is None:
        return fitted
    own = {term: getattr(fitted.default_coefficients, term) for term in ENGINE_SOFTWARE_COSTS}
    status = (
        f"{measured.device_name}; read by {engine} without {fitted_for}'s own per-request and "
        f"per-prefill-pass costs (the datasheet's instead)"
    )
    coefficients = measured.coefficients.model_dump() | own
    borrowed = measured.model_dump() | {"coefficients": coefficients, "device_name": status}
    return HardwareProfile.model_validate(fitted.model_dump() | {"measured": borrowed})


def _card_by_id(name: str, *, engine: str | None, fit_engine: str | None) -> HardwareProfile:
    """resolve_card for a name that is no path: a profile id or a variant id."""
    key = name.strip().lower()
    card_id = key if key in _files("hwprofiles") else variant_map().get(key)
    if card_id is not None:
        base = load_card(card_id)
        fitted = None
        if fit_engine is not None and not base.is_calibrated:
            fitted = fitted_profile(card_id, fit_engine)
            if fitted is not None and engine is not None and engine != fit_engine:
                fitted = borrowed_fit(fitted, engine=engine, fitted_for=fit_engine)
        profile = fitted or base
        return profile if key == card_id else profile.with_variant(key)
    raise UnknownIdError("hardware profile", name, [*card_ids(), *variant_map()], "hwprofiles/")


@functools.cache
def variant_map() -> dict[str, str]:
    """Card variant (SKU) id -> the catalogued profile that lists it (hwprofiles/<card>.yaml `variants`).

    A variant shares its chip's profile (and fitted speeds); only the memory figures differ. A variant id
    never equals a profile id."""
    variants: dict[str, str] = {}
    for card_id in card_ids():
        for variant in load_card(card_id).variants:
            if variant.id in variants or (variant.id in _files("hwprofiles") and variant.id != card_id):
                raise DataFileError(
                    f"{_files('hwprofiles')[card_id]}: variants: '{variant.id}' is already taken "
                    f"(expected each variant id once and never another profile's id)"
                )
            variants[variant.id] = card_id
    return variants


def calibration_by_engine(card_id: str, *, profile_engine: Mapping[str, str] | None = None) -> dict[str, str]:
    """Engine -> where a plan's speeds on this card come from (HardwareProfile.calibration_status of the
    profile resolve_card picks for that engine): the one status `kvplan cards`, plans and the dashboard
    show. profile_engine: engine -> the engine whose fitted profile it reads (the engine registry's
    fitted_profile_engine; the catalog sits below it), each its own when not given."""
    borrowed = profile_engine or {}
    return {
        engine: resolve_card(card_id, engine=engine, profile_engine=borrowed.get(engine)).calibration_status
        for engine in ENGINES
    }


@functools.cache
def fitted_profile(card_id: str, engine: str) -> HardwareProfile | None:
    """The card's profile fitted to published serving results for `engine`, or None when none is shipped.

    hwprofiles/fitted/<card>.<engine>.yaml (lab/published/fit_profiles.py writes them): the card's
    profile plus a measured block (backend bench-fit) naming the rows it stands on; its id is the card's.
    """
    path = data_dir("hwprofiles") / "fitted" / f"{card_id}.{engine}.yaml"
    if not _is_file(path):
        return None
    profile = load_item(path, HardwareProfile, check_stem=False)
    if profile.id != card_id or profile.measured is None:
        raise DataFileError(
            f"{path}: id/measured: a fitted profile keeps its card's id and has a measured block "
            f"(got id {profile.id!r}, expected {card_id!r})"
        )
    return profile


@functools.cache
def load_card(card_id: str) -> HardwareProfile:
    """The catalogued hardware profile with this exact id."""
    return load_item(_files("hwprofiles")[card_id], HardwareProfile)
