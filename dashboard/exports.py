"""The sidebar's Export section: the plan as `kvplan --json` prints it, the MindIE config.json and the
vllm-ascend command (planner.plan.payload, dashboard.view's config writers: the CLI's own builders).

The Plan (JSON) download is the document `kvplan <the page's settings as flags> --json` prints: the same
builder (planner.plan.payload.plan_payload), with the next command repeating the page's settings in the
CLI's flags (page_flags). The SLO widgets are not in it: `kvplan` without SLO flags plans by memory, as the
page's headline does; the SLO search is the Speed tab's.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st
from pydantic import ValidationError

from dashboard import view as dashboard
from dashboard.sections import Settings, cached_mindie, cached_plan, cached_vllm
from dashboard.sidebar import engine_fraction, fraction_key
from planner import records
from planner.errors import KvplanError, PlanInputError
from planner.inputs import DEFAULT_BLOCK_SIZE_TOKENS, PlanRequest
from planner.plan.payload import plan_payload
from planner.results import Plan

# PlanRequest field -> the flag of `kvplan`, in the order the CLI's next command repeats them (its
# declaration order, planner/cli config_flags); tests/test_app_audit.py holds the page's JSON to the CLI's.
REQUEST_FLAGS = (
    ("model", "--model"), ("tp", "--tp"), ("ctx", "--ctx"), ("bandwidth_gbps", "--bandwidth-gbps"),
    ("mtp", "--mtp"), ("mtp_acceptance", "--mtp-acceptance"), ("calibrated", "--uncalibrated"),
    ("card", "--card"), ("dtype", "--dtype"), ("kv_dtype", "--kv-dtype"), ("batch", "--batch"),
    ("block_size", "--block-size"), ("memory_fraction", "--memory-fraction"), ("memory_gib", "--memory-gib"),
)  # fmt: skip
ALWAYS_SHOWN = ("model", "card", "dtype", "tp", "ctx")  # the page always chooses these


def page_flags(req: PlanRequest, *, default_fraction: float) -> str:
    """The page's settings as `kvplan` flags: the ones it always sets, the others where they differ from the
    CLI's default (MTP acceptance with MTP, the memory fraction where the slider left the engine's own)."""
    given = {
        "kv_dtype": req.kv_dtype is not None,
        "batch": req.batch is not None,
        "bandwidth_gbps": req.bandwidth_gbps is not None,
        "memory_gib": req.memory_gib is not None,
        "mtp": req.mtp > 0,
        "mtp_acceptance": req.mtp > 0,
        "calibrated": not req.calibrated,
        "block_size": req.block_size != DEFAULT_BLOCK_SIZE_TOKENS,
        "memory_fraction": req.memory_fraction != default_fraction,
    }
    words = []
    for field, flag in REQUEST_FLAGS:
        if field in ALWAYS_SHOWN or given[field]:
            value = getattr(req, field)
            value = Path(value).name if field in ("model", "card") and "/" in value else value  # uploads
            text = f"{value:g}" if isinstance(value, float) else str(value)
            words.append(flag if isinstance(value, bool) else f"{flag} {shlex.quote(text)}")
    return " ".join(words)


def plan_json_text(settings: Settings) -> str:
    """`kvplan --json`'s document for the page's settings (strict JSON, as the CLI prints it)."""
    req = settings.req
    dep, plan = cached_plan(req, settings.prompt)
    default = engine_fraction(req.engine, **deployment_where(req))
    payload = plan_payload(plan, dep, flags=page_flags(req, default_fraction=default))
    return json.dumps(payload, indent=2, allow_nan=False) + "\n"


def show_downloads(settings: Settings, plan: Plan) -> None:
    """Sidebar download buttons: the JSON plan, the MindIE config.json and the vllm-ascend command."""
    st.sidebar.divider()
    st.sidebar.subheader("Export")
    st.sidebar.download_button(
        "Plan (JSON)",
        plan_json_text(settings),
        file_name=f"kvplan-{plan.model}.json",
        mime="application/json",
        key="download_plan",
        icon=":material/download:",
        help="What `kvplan --json` prints for these settings (without the SLOs: the Speed tab's search)",
    )
    if st.session_state.get("weights_path_model") != plan.model:  # a new model: its own default path
        st.session_state["weights_path"] = f"/data/models/{plan.model}"
        st.session_state["weights_path_model"] = plan.model
    weights_path = st.sidebar.text_input(
        "Checkpoint path on the server",
        key="weights_path",
        help="MindIE modelWeightPath; the model argument of `vllm serve`",
    )
    if not weights_path.strip():  # as `kvplan mindie` / `kvplan vllm` refuse an empty --weights-path
        st.sidebar.warning(
            "Checkpoint path on the server: empty. Enter the checkpoint's folder on the server to get the "
            "MindIE config.json and the vllm-ascend command."
        )
        return
    mindie, vllm = (engine_request(settings.req, engine) for engine in ("mindie", "vllm"))
    show_export("MindIE config.json", cached_mindie, mindie, weights_path, file_name="config.json")
    show_export("vllm-ascend command", cached_vllm, vllm, weights_path, file_name="vllm-serve.sh")


def deployment_where(req: PlanRequest) -> dict[str, Any]:
    """What an engine's own memory setting depends on (sidebar.engine_fraction's keywords)."""
    return {"card": req.card, "tp": req.tp, "drafting": req.mtp > 0, "memory_gib": req.memory_gib}


def engine_request(req: PlanRequest, engine: str) -> PlanRequest:
    """The page's request for another engine's export, at that engine's memory setting: the value set on
    its slider, else its own default (MindIE 0.8, vLLM 0.92), not the page engine's."""
    where = deployment_where(req)
    fraction = st.session_state.get(fraction_key(engine, **where), engine_fraction(engine, **where))
    return records.replace(req, engine=engine, memory_fraction=float(fraction))


def show_export(
    label: str,
    make: Callable[[Any, str], tuple[str, list[str]]],
    req: PlanRequest,
    weights_path: str,
    *,
    file_name: str,
) -> None:
    """One engine's file as a download button and its notes; a sidebar warning when the plan cannot be
    written in that engine's terms (the plan itself stands: it may be another engine's)."""
    try:
        text, notes = make(req, weights_path)
    except ValidationError as exc:  # the serving options' own checks (a checkpoint path read as a flag)
        flags = "; ".join(f"--{str(e['loc'][0]).replace('_', '-')}: {e['msg']}" for e in exc.errors()[:2])
        st.sidebar.warning(f"No {label}: {dashboard.dashboard_message(PlanInputError(flags))}")
        return
    except KvplanError as exc:
        st.sidebar.warning(f"No {label} for this plan: {dashboard.dashboard_message(exc)}")
        return
    st.sidebar.download_button(
        label,
        text,
        file_name=file_name,
        mime="application/json" if file_name.endswith(".json") else "text/x-shellscript",
        key=f"download_{file_name}",
        icon=":material/download:",
    )
    with st.sidebar.expander(f"{label}: notes"):
        if not file_name.endswith(".json"):
            st.code(text, language="bash")
        for note in notes:
            st.caption(note)
