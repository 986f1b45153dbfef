"""`kvplan mindie`'s report on stderr: the plan behind the config, the start-up log comparison (--from-log),
every config.json field kvplan set, the npuBlockNum prediction, the exports and the notes. No formulas:
planner/engines/mindie/ computes everything; planner/cli/configs.py runs the command and prints the plan
first (render.py; this module does not import it, keeping the import chain short).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from planner.engines.common import Lengths
    from planner.engines.mindie.config import MindieResult
    from planner.engines.mindie.log import LogComparison
    from planner.results import Plan


def _log_lines(comparison: LogComparison) -> list[str]:
    from planner import units

    real_blocks = comparison.real_npu_block_num
    return [
        f"MindIE log vs plan: npuBlockNum predicted {comparison.predicted_npu_block_num}, logged "
        f"{real_blocks if real_blocks is not None else 'n/a'}; KV budget predicted "
        f"{units.fmt_gib(comparison.predicted_kv_budget_bytes)}, "
        f"real {units.fmt_gib(comparison.real_kv_budget_bytes)} "
        f"(from {comparison.source})",
        f"Reserve corrected by {units.fmt_gib(comparison.reserve_delta_bytes)}: runtime reserve now "
        f"{units.fmt_gib(comparison.corrected_runtime_bytes)} per card; the plan above and the config use it",
        *(f"log note: {note}" for note in comparison.notes),
    ]


def print_mindie(
    console: Console, *, plan: Plan, result: MindieResult, lengths: Lengths, comparison: LogComparison | None
) -> None:
    """After the plan (render.print_plan, on the same `console`): the log comparison, every field kvplan set,
    the npuBlockNum prediction, exports, notes."""
    from rich.markup import escape
    from rich.table import Table

    from planner import units
    from planner.engines.mindie import config as mindie

    for line in _log_lines(comparison) if comparison else []:
        console.print(escape(line))
    table = Table(title="MindIE config.json: fields set by kvplan", header_style="bold")
    table.add_column("field", overflow="fold")
    table.add_column("value", overflow="fold")
    table.add_column("from")
    from planner.engines.mindie.fields import OWNED_FIELDS

    for field in OWNED_FIELDS:
        value = mindie.lookup(result.config, field.path)
        shown = "(absent)" if value is mindie.MISSING else json.dumps(value)
        table.add_row(field.dotted, escape(shown), escape(field.derivation))
    console.print(table)
    p = result.prediction
    console.print(
        f"Predicted npuBlockNum per card: [bold]{p.npu_block_num}[/bold] "
        f"({p.allocated_blocks} blocks of {plan.block_size_tokens} tokens x "
        f"{units.fmt_bytes(p.block_bytes)} in "
        f"{units.fmt_gib(p.kv_budget_bytes)}, {p.allocated_blocks - p.npu_block_num} kept by MindIE)"
    )
    console.print(
        f"Concurrency at {lengths.max_input_tokens} in + {lengths.max_output_tokens} out: "
        f"{p.concurrency} requests of {p.blocks_per_request} blocks; maxBatchSize "
        f"{mindie.lookup(result.config, ('BackendConfig', 'ScheduleConfig', 'maxBatchSize'))}"
    )
    for name, value in result.env.items():
        console.print(f"export {name}={value}")
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
