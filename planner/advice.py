"""What to try when a deployment does not fit: only options that were checked to work.

capacity.check_fits words the refusal; this module searches the neighbouring deployments (larger --tp,
smaller weight dtypes the card can run, shorter --ctx) with a `fits` predicate capacity supplies, so every
hint it prints leads to a plan, not to a further error (issue 12: "--dtype fp8" on a card without FP8 units,
or tp 1 -> 2 -> 4 when 8 is the first that fits).
"""

from __future__ import annotations

from collections.abc import Callable

from planner import memory
from planner.deployment import Deployment
from planner.dtypes import WEIGHT_SCHEMES

TP_CHOICES = (1, 2, 4, 8, 16, 32, 64)  # the --tp range 1..64 in powers of two
Fits = Callable[[Deployment], bool]


def with_tp(dep: Deployment, tp: int) -> Deployment:
    """dep at tensor-parallel degree tp; an expert parallelism that spans the tp x dp group (ep = tp x dp > 1)
    grows with it, as the engines that split the experts over the whole group require."""
    spans = dep.ep > 1 and dep.ep == dep.tp * dep.dp
    return dep.model_copy(update={"tp": tp, **({"ep": tp * dep.dp} if spans else {})})


def tp_words(dep: Deployment, tp: int) -> str:
    """`--tp N`, with `--ep M` where with_tp grows the expert parallelism too."""
    ep = with_tp(dep, tp).ep
    return f"--tp {tp}" + (f" --ep {ep}" if ep != dep.ep else "")


def smallest_tp(dep: Deployment, *, fits: Fits) -> int | None:
    """The smallest tp above dep.tp (a power of two dividing the attention heads) at which dep fits
    (with_tp: an ep spanning the group grows with it)."""
    for tp in TP_CHOICES:
        if tp > dep.tp and dep.model.num_attention_heads % tp == 0 and fits(with_tp(dep, tp)):
            return tp
    return None


def model_weight_bytes(dep: Deployment, name: str) -> int:
    """dep's model's weight bytes in scheme `name`, unsharded (tp 1): what "smaller" means here, since an
    experts-only scheme (w4a8, w4a16-moe) keeps every matmul of a dense model at 8 or 16 bits.

    Formula: memory.weight_bytes_per_device(model, scheme, activation dtype of dep, tp=1), bytes.
    """
    scheme = WEIGHT_SCHEMES[name]
    return memory.weight_bytes_per_device(
        dep.model, scheme=scheme, activation_dtype=dep.activation_dtype, tp=1
    )


def runnable_smaller_dtypes(dep: Deployment) -> list[str]:
    """Weight dtypes the card can run (native units, or weight-only) that store dep's model in fewer bytes
    than dep's dtype (model_weight_bytes), in WEIGHT_SCHEMES order."""
    own = model_weight_bytes(dep, dep.weight_scheme.name)
    native = dep.hardware.native_dtypes
    return [
        name
        for name, scheme in WEIGHT_SCHEMES.items()
        if (scheme.requires_native is None or scheme.requires_native in native)
        and model_weight_bytes(dep, name) < own
    ]


def fitting_dtypes(dep: Deployment, *, fits: Fits) -> list[str]:
    """Smaller weight dtypes the card runs at which dep fits at its own tp."""
    candidates = runnable_smaller_dtypes(dep)
    return [name for name in candidates if fits(dep.model_copy(update={"weight_scheme_name": name}))]


def combined_hint(dep: Deployment, *, fits: Fits) -> str | None:
    """`--tp N --dtype D` with the dtype the card runs that stores the model in the fewest bytes
    (model_weight_bytes; the first of WEIGHT_SCHEMES on a tie) and the smallest tp that then fits."""
    candidates = runnable_smaller_dtypes(dep)
    if not candidates:
        return None
    smallest = min(candidates, key=lambda name: model_weight_bytes(dep, name))
    tp = smallest_tp(dep.model_copy(update={"weight_scheme_name": smallest}), fits=fits)
    return None if tp is None else f"{tp_words(dep, tp)} --dtype {smallest}"


def checkpoint_hint(dep: Deployment, *, fits: Fits) -> list[str]:
    """`--dtype D (the checkpoint's)` when the card records its checkpoint's dtype D (checkpoint_dtype, from
    `kvplan models import`), dep plans another, the card runs D and dep fits at it; else []."""
    stored = dep.model.checkpoint_dtype
    if stored is None or stored == dep.weight_scheme.name:
        return []
    native = WEIGHT_SCHEMES[stored].requires_native
    if native is not None and native not in dep.hardware.native_dtypes:
        return []
    return (
        [f"--dtype {stored} (the checkpoint's)"]
        if fits(dep.model_copy(update={"weight_scheme_name": stored}))
        else []
    )


def no_fit_hints(dep: Deployment, *, fits: Fits, longest_ctx_tokens: int) -> list[str]:
    """Options that each make dep fit: the card's own checkpoint dtype (checkpoint_hint), the smallest
    larger --tp, smaller dtypes the card runs, a shorter --ctx (longest_ctx_tokens, 0: none); when neither tp
    nor dtype alone works, the two together."""
    hints: list[str] = checkpoint_hint(dep, fits=fits)
    tp = smallest_tp(dep, fits=fits)
    if tp is not None:
        hints.append(tp_words(dep, tp))
    fitting = fitting_dtypes(dep, fits=fits)
    named = dep.model.checkpoint_dtype if hints else None  # the checkpoint's, named once, first
    dtypes = [name for name in fitting if name != named]
    if dtypes:
        hints.append(f"--dtype {' or '.join(dtypes)}")
    if tp is None and not fitting:
        both = combined_hint(dep, fits=fits)
        hints += [both] if both else []
    if longest_ctx_tokens:
        hints.append(f"--ctx {longest_ctx_tokens} or less")
    return hints
