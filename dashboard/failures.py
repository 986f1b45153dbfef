"""What the page says when something fails: one line naming the input or the section, never a traceback or
a server path (pure: no streamlit).

A planner error (KvplanError) already names the flag, which dashboard.view turns into the widget's label. A
value the sidebar could not turn into a request (pydantic's ValidationError) names its field by the widget's
label. Anything else is a bug in one section: the line names the section and the error type, and the rest of
the page still draws.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from dashboard import view
from planner.errors import KvplanError

# PlanRequest fields -> the sidebar's labels (PlanRequest is what the sidebar fills in)
FIELD_LABELS = {
    "model": "Model",
    "card": "Card",
    "dtype": "Weight dtype",
    "kv_dtype": "KV-cache dtype",
    "tp": "Tensor parallel (tp)",
    "ctx": "Context length (tokens)",
    "batch": "Batch (concurrent sequences)",
    "memory_gib": "Memory capacity (GiB)",
    "bandwidth_gbps": "Memory bandwidth (GB/s)",
    "memory_fraction": "Memory fraction",
    "block_size": "KV block size (tokens)",
    "mtp": "MTP draft tokens",
    "mtp_acceptance": "MTP acceptance",
    "engine": "Engine",
}
_PATH = re.compile(r"(?:/[\w.\-]+){2,}")
MAX_DETAIL_CHARS = 200


def _field_line(exc: ValidationError) -> str:
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error.get("loc", ()))
    label = FIELD_LABELS.get(field, field or "input")
    return f"{label}: {error.get('msg', 'invalid value')} (got {error.get('input')!r:.60})"


def failure_message(exc: Exception, *, where: str) -> str:
    """One line for the page: the widget or section that failed and why, with server paths cut."""
    if isinstance(exc, KvplanError):
        return view.dashboard_message(exc)
    if isinstance(exc, ValidationError):
        return _field_line(exc)
    detail = _PATH.sub("<path>", str(exc).strip().splitlines()[0] if str(exc).strip() else "")
    detail = f": {detail[:MAX_DETAIL_CHARS]}" if detail else ""
    return (
        f"{where}: could not be drawn for these settings ({type(exc).__name__}{detail}); "
        "the rest of the page is unaffected"
    )
