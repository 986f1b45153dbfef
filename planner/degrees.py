"""The parallel degrees of one instance (tp, dp, ep, pp): one value object that the deployment, the layout
report and the layout search's candidates all carry, so that no record copies the four fields one by one.

`carried(record, names)` is the one way a record hands fields it shares by name to another record's
constructor (`Target(**carried(source, DEGREES), ...)`): pydantic validates them there, by name.
"""

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_TP = 64  # the largest tensor-parallel degree kvplan plans (a single attention group)
MAX_DEGREE = 1024  # a parallel degree, node count or node size beyond this is a typo, not a plan


class Degrees(BaseModel):
    """Parallel degrees of one instance: tensor, attention data, expert and pipeline (planner/layout.py
    says how each one shards the model). The instance spans tp x dp x pp devices; ep splits the routed
    experts over tp x dp of them."""

    # schema.Frozen's config, spelled here so that this module imports no planner module: the deployment
    # and the results build on it, and their import chains stay as short as before (tests/test_layering.py;
    # tests/test_degrees.py checks that the two configs agree)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    tp: int = Field(ge=1, le=MAX_TP)
    dp: int = Field(default=1, ge=1, le=MAX_DEGREE)  # attention data parallel
    ep: int = Field(default=1, ge=1, le=MAX_DEGREE)  # expert parallel: routed experts split ep ways
    pp: int = Field(default=1, ge=1, le=MAX_DEGREE)  # pipeline stages


DEGREES = tuple(Degrees.model_fields)  # ("tp", "dp", "ep", "pp")


def carried(record: object, names: Iterable[str]) -> dict[str, Any]:
    """The named fields of `record`, as keywords for another record that carries them under the same
    names (validated again by that record's constructor)."""
    return {name: getattr(record, name) for name in names}
