"""Where the Compare tab's columns B and C start: the alternatives a deployment engineer weighs first.

Pure (no streamlit). B is the same deployment in the other weight dtype the card runs (FP8 <-> W8A8, 16-bit
-> the 8-bit one the card has), C the same deployment at the next tensor-parallel size the engine runs (a
smaller one at the top of the ladder). Neither starts identical to A, the sidebar's configuration.
"""

from __future__ import annotations

from collections.abc import Callable

TP_LADDER = (1, 2, 4, 8, 16)
# Preferred 8-bit alternative per weight dtype, first the card runs wins; 16-bit always runs.
DTYPE_ALTERNATIVES: dict[str, tuple[str, ...]] = {
    "fp8": ("int8", "bf16"),
    "int8": ("fp8", "bf16"),
    "bf16": ("fp8", "int8"),
    "fp16": ("fp8", "int8"),
}
DEFAULT_ALTERNATIVES = ("fp8", "int8", "bf16")
NATIVE_8BIT_NEEDS = {"fp8": "fp8", "int8": "int8"}  # weight dtype -> the native unit it needs


def alternative_dtype(dtype: str, *, native_dtypes: tuple[str, ...]) -> str:
    """The weight dtype column B starts on: another one than `dtype` that the card can run."""
    for candidate in DTYPE_ALTERNATIVES.get(dtype, DEFAULT_ALTERNATIVES):
        needs = NATIVE_8BIT_NEEDS.get(candidate)
        if candidate != dtype and (needs is None or needs in native_dtypes):
            return candidate
    return "bf16" if dtype != "bf16" else "fp16"


def alternative_tp(tp: int, *, plans: Callable[[int], bool] = lambda _: True) -> int:
    """The tensor-parallel size column C starts on: the next on the ladder that `plans` (the engine and the
    card run it), else the previous ones down the ladder; the next on the ladder when none plans (its error
    then shows in the column)."""
    larger = [t for t in TP_LADDER if t > tp]
    smaller = [t for t in reversed(TP_LADDER) if t < tp]
    candidates = larger + smaller
    if not candidates:
        return tp
    return next((t for t in candidates if plans(t)), candidates[0])
