"""What to try when a deployment does not fit: only options that were checked to work.

capacity.check_fits words the refusal; this module searches the neighbouring deployments (larger --tp,
smaller weight dtypes the card can run, shorter --ctx) with a `fits` predicate capacity supplies, so every
hint it prints leads to a plan, not to a further error (issue 12: "--dtype fp8" on a card without FP8 units,
or tp 1 -> 2 -> 4 when 8 is the first that fits).
"""

from __future__ import annotations

from collections.abc import Callable

from planner.deployment import Deployment
from planner.dtypes import WEIGHT_SCHEMES

TP_CHOICES = (1, 2, 4, 8, 16, 32, 64)  # the --tp range 1..64 in powers of two
Fits = Callable[[Deployment], bool]


def smallest_tp(dep: Deployment, *, fits: Fits) -> int | None:
    """The smallest tp above dep.tp (a power of two dividing the attention heads) at which dep fits."""
    for tp in TP_CHOICES:
        if (
            tp > dep.tp
            and dep.model.num_attention_heads % tp == 0
            and fits(dep.model_copy(update={"tp": tp}))
        ):
            return tp
    return None


def runnable_smaller_dtypes(dep: Deployment) -> list[str]:
    """Weight dtypes with fewer bits than dep's that the card can run (native units, or weight-only)."""
    bits = dep.weight_scheme.weight_bits
    native = dep.hardware.native_dtypes
    return [
        name
        for name, scheme in WEIGHT_SCHEMES.items()
        if scheme.weight_bits < bits and (scheme.requires_native is None or scheme.requires_native in native)
    ]


def fitting_dtypes(dep: Deployment, *, fits: Fits) -> list[str]:
    """Smaller weight dtypes the card runs at which dep fits at its own tp."""
    candidates = runnable_smaller_dtypes(dep)
    return [name for name in candidates if fits(dep.model_copy(update={"weight_scheme_name": name}))]


def combined_hint(dep: Deployment, *, fits: Fits) -> str | None:
    """`--tp N --dtype D` with the smallest dtype the card runs and the smallest tp that then fits."""
    smallest = runnable_smaller_dtypes(dep)[-1:]
    if not smallest:
        return None
    tp = smallest_tp(dep.model_copy(update={"weight_scheme_name": smallest[0]}), fits=fits)
    return None if tp is None else f"--tp {tp} --dtype {smallest[0]}"


def no_fit_hints(dep: Deployment, *, fits: Fits, longest_ctx_tokens: int) -> list[str]:
    """Options that each make dep fit: the smallest larger --tp, smaller dtypes the card runs, a shorter
    --ctx (longest_ctx_tokens, 0: none); when neither tp nor dtype alone works, the two together."""
    hints: list[str] = []
    tp = smallest_tp(dep, fits=fits)
    if tp is not None:
        hints.append(f"--tp {tp}")
    dtypes = fitting_dtypes(dep, fits=fits)
    if dtypes:
        hints.append(f"--dtype {' or '.join(dtypes)}")
    if tp is None and not dtypes:
        both = combined_hint(dep, fits=fits)
        hints += [both] if both else []
    if longest_ctx_tokens:
        hints.append(f"--ctx {longest_ctx_tokens} or less")
    return hints
