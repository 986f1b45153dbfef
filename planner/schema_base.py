"""The strict base of every data-file model, and provenance: `Frozen` (unknown keys fail, immutable),
`DataModel` (what a data file holds: booleans stay booleans), `Source` and `HfSource`.

planner/schema.py re-exports everything here; this module imports no planner module, so the models built on
it (schema_card.py, schema_hardware.py) sit two files above the import graph's floor.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

Confidence = Literal["P", "S", "D", "NF"]


_BOOL_POLICY: dict[tuple[type, str], str] = {}  # (model, field) -> "bool" | "free" | "no-bool"


def _bool_policy(model: type[BaseModel], name: str) -> str:
    """How a field treats true/false: "bool" (only true/false), "free" (anything the type takes: Any, text,
    a nested model) or "no-bool" (a number, or a list or map of numbers: true/false refused). Cached."""
    key = (model, name)
    if key not in _BOOL_POLICY:
        field = model.model_fields.get(name)
        text = repr(field.annotation) if field is not None else "Any"
        if text in ("<class 'bool'>", "bool | None", "typing.Optional[bool]"):
            _BOOL_POLICY[key] = "bool"
        elif any(w in text for w in ("bool", "Any", "object")) or not any(
            w in text for w in ("int", "float", "Literal")
        ):
            _BOOL_POLICY[key] = "free"
        else:
            _BOOL_POLICY[key] = "no-bool"
    return _BOOL_POLICY[key]


class Frozen(BaseModel):
    """Strict base: unknown keys fail, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# A record the plain plan never makes (vLLM's pool and logs, layouts, SLO answers, serving options) builds its
# validator on first use, not at import: each build costs 1-5 ms, ~24 ms of the mission command's start-up
# (benchmarks/bench_startup.py). Validation is the same either way.
BUILT_ON_FIRST_USE = ConfigDict(defer_build=True)


class DataModel(Frozen):
    """Base of what a data file holds (model cards, hardware profiles): Frozen, and booleans stay booleans:
    `true` is not 1 in a number field (or its list or map), and only true/false fill a bool field (not 1
    or "yes"). Only file-facing models pay for this check; the planner's own results do not."""

    # Validators build on first validation, not at import: a plan whose card and profile come from the
    # catalogue cache (planner/catalog_cache.py) validates none, and saves building them (~0.06e9
    # instructions of the mission command's start-up; benchmarks/bench_startup.py).
    model_config = ConfigDict(defer_build=True)

    @field_validator("*", mode="before")
    @classmethod
    def _strict_booleans(cls, value: object, info: ValidationInfo) -> object:
        policy = _bool_policy(cls, info.field_name or "")
        if policy == "bool":
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"must be true or false (got {value!r})")
            return value
        if policy == "free":
            return value
        inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        if isinstance(value, bool) or any(isinstance(item, bool) for item in inner):
            raise ValueError("must be a number or text, not true/false")
        return value


class Source(DataModel):
    """Where a figure comes from. confidence: P primary, S secondary, D derived, NF not found (assumed)."""

    ref: str = Field(min_length=1)
    confidence: Confidence
    fields: list[str] = Field(default_factory=list)
    note: str = ""


class HfSource(DataModel):
    """The Hugging Face repository a card mirrors."""

    hf_repo: str
    revision: str = "main"
