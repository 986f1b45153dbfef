"""The `--explain` table: every term of a roofline ledger as rich table rows (times in ms). No formulas."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner import units

if TYPE_CHECKING:
    from rich.table import Table

    from planner.perf.roofline import Ledger, Op

BOUND_LABELS = {"memory": "mem", "compute": "comp", "overhead": "fixed", "interconnect": "link"}
EXPLAIN_COLUMNS = (
    "op",
    "layers",
    "kernels",
    "bytes",
    "FLOP",
    "xfer",
    "comp",
    "fixed",
    "time",
    "share",
    "bound",
)


def _ms(seconds: float) -> str:
    return f"{units.s_to_ms(seconds):.2f}"


def explain_row(op: Op, *, total_s: float) -> tuple[str, ...]:
    """One ledger op as table cells (times in ms)."""
    times = (_ms(op.transfer_s), _ms(op.compute_s), _ms(op.overhead_s), _ms(op.time_s))
    counts = (op.name, str(op.layers), str(op.kernels), units.fmt_bytes(op.bytes), f"{op.flop:.2g}")
    return (*counts, *times, units.fmt_fraction(op.time_s / total_s), BOUND_LABELS[op.bound])


def render_explain(ledger: Ledger) -> Table:
    """Every op of a ledger: layers, kernels, bytes, FLOP, the three time components, total, share, bound.

    Times in ms: "xfer" bytes / effective bandwidth (HBM, or the link for tp.allreduce), "comp" FLOP /
    effective peak, "fixed" kernel launches and all-reduce latency; "time" = max(xfer, comp) + fixed.
    """
    from rich import box
    from rich.table import Table

    tag = "calibrated" if ledger.calibrated else "uncalibrated"
    title = (
        f"{ledger.phase} ledger: batch {ledger.batch}, ctx {ledger.ctx_tokens}, {ledger.query_tokens} query "
        f"tokens, {ledger.chunks} pass(es), {tag}; times in ms, time = max(xfer, comp) + fixed"
    )
    link = f", interconnect {units.fmt_bytes(ledger.link_bytes)}" if ledger.link_bytes else ""
    caption = f"HBM {units.fmt_bytes(ledger.hbm_bytes)}{link}"
    table = Table(title=title, caption=caption, box=box.SIMPLE, pad_edge=False, collapse_padding=True)
    for name in EXPLAIN_COLUMNS:
        table.add_column(name, justify="left" if name in ("op", "bound") else "right", no_wrap=name == "op")
    for op in ledger.ops:
        table.add_row(*explain_row(op, total_s=ledger.time_s))
    table.add_section()
    kernels = str(sum(o.kernels for o in ledger.ops))
    totals = ("total", "", kernels, units.fmt_bytes(ledger.hbm_bytes), f"{ledger.flop:.2g}", "", "", "")
    table.add_row(*totals, _ms(ledger.time_s), units.fmt_fraction(1.0), "")
    return table
