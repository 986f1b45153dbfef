"""Planner text in the dashboard's words: CLI flags become the widgets that set the same value, advice the
page cannot follow becomes what it can, and the server's scratch folders are cut from uploaded file paths.

Pure: no streamlit. The CLI's own messages stay as they are; this is the page's boundary.
"""

from __future__ import annotations

import re
import tempfile

# CLI flags in planner messages -> the dashboard widget that sets the same value.
WIDGET_LABELS = {
    "model": "Model",
    "card": "Card",
    "dtype": "Weight dtype",
    "kv-dtype": "KV-cache dtype",
    "tp": "Tensor parallel (tp)",
    "ctx": "Context length",
    "batch": "Batch",
    "block-size": "KV block size",
    "memory-fraction": "Memory fraction",
    "memory-gib": "Memory capacity (GiB)",
    "bandwidth-gbps": "Memory bandwidth (GB/s)",
    "mtp": "MTP draft tokens",
    "mtp-acceptance": "MTP acceptance",
    "engine": "Engine",
    "prompt-tokens": "Prompt tokens for TTFT",
    "weights-path": "Checkpoint path on the server",
    "npu-mem-size": "npuMemSize",
    "input-tokens": "Prompt tokens for TTFT",
    "tpot-ms": "TPOT SLO (ms)",
    "ttft-ms": "TTFT SLO (ms)",
}
# CLI advice the page has no control for -> what the page can do instead (before the flags are respelled).
PAGE_ADVICE = (
    (re.compile(r"--tpot-ms / --min-user-tps"), "TPOT SLO (ms)"),
    (re.compile(r"; raise --max-prefill-tokens \(--max-num-batched-tokens\) or lower it"), "; lower it"),
    (re.compile(r"above --max-num-batched-tokens"), "above vLLM's max_num_batched_tokens"),
    (re.compile(r", set `kvplan mindie --max-input-tokens` within it \([^)]*\),"), ""),
)
# A flag's value follows it ("--tp 4", "--engine vllm", "--model tiny-llama"); a plain word does not ("no
# larger --tp or smaller --dtype fits"): a value holds a digit, '.', '/' or '-', or is an engine or a switch.
_VALUE = r"(?=[\w./-]*[\d./-]|(?:mindie|vllm|sglang|transformers|auto|true|false)\b)"
_FLAG = re.compile(rf"--([a-z][a-z0-9-]*[a-z0-9])( {_VALUE})?")
# A value the user typed, echoed back ("got '--batch 5'"), is shown as typed: flags inside it stay flags.
_ECHOED = re.compile(r"""(got (?:'[^'\n]*'|"[^"\n]*"))""")
_TEMP_DIRS = re.compile(r"\S*?kvplan-(?:dashboard|uploads)-[^/\s]*/(?:[0-9a-f]{16}/)?")


def _widget_words(match: re.Match[str]) -> str:
    label = WIDGET_LABELS.get(match.group(1))
    if label is None:
        return match.group(0)
    return label + (" = " if match.group(2) else "")


def _alternate(parts: list[str]) -> list[tuple[bool, str]]:
    return [(index % 2 == 1, part) for index, part in enumerate(parts)]


def dashboard_message(exc: Exception) -> str:
    """A planner error in the dashboard's words: CLI flags become the widget names ("--tp 4" ->
    "Tensor parallel (tp) = 4"), and the server's scratch folders are cut from uploaded file paths."""
    return dashboard_words(str(exc))


def dashboard_words(text: str) -> str:
    """dashboard_message for any planner text (a plan's notes and warnings name CLI flags too)."""
    for advice, words in PAGE_ADVICE:
        text = advice.sub(words, text)
    parts = _ECHOED.split(text)  # odd items are echoed values
    text = "".join(part if odd else _FLAG.sub(_widget_words, part) for odd, part in _alternate(parts))
    text = _TEMP_DIRS.sub("", text)
    return text.replace(tempfile.gettempdir().rstrip("/") + "/", "")
