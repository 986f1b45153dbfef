"""The dashboard's sidebar: model (catalogue or an uploaded config.json), card (with overrides or a calibrated
profile), the plan's shape, the SLOs and the engine settings, gathered into one Settings (a PlanRequest plus
the SLOs). Widgets only: dashboard/app.py draws the page from the Settings.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import uploads
from dashboard import view as dashboard
from dashboard.sections import KV_DTYPE_CHOICES, TP_CHOICES, Settings, catalogue
from planner import catalog, inputs
from planner.dtypes import WEIGHT_SCHEMES
from planner.engines import registry
from planner.errors import KvplanError
from planner.inputs import AUTO_DTYPE, DEFAULT_CARD, PlanRequest
from planner.kinds import DEFAULT_ENGINE, ENGINES, parse_engine

DEFAULT_MODEL = "qwen3.5-27b"
DEFAULT_WEIGHT_DTYPE = "fp8"  # the README's mission: Qwen3-27B in FP8 on the 950PR
CTX_CHOICES = ["1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k", "256k"]
DEFAULT_TPOT_MS = 100.0
DEFAULT_TTFT_MS = 10000.0


def upload_dir() -> Path:
    """This browser session's scratch folder for uploaded files.

    A TemporaryDirectory held in st.session_state: deleted when Streamlit drops the session (the object is
    collected) or, at the latest, when the server exits.
    """
    if "upload_tempdir" not in st.session_state:
        st.session_state["upload_tempdir"] = tempfile.TemporaryDirectory(prefix="kvplan-dashboard-")
    return Path(st.session_state["upload_tempdir"].name)


class NoModelError(KvplanError):
    """Model source "upload config.json" without a card imported from it: the page plans nothing (not the
    catalogue's model the user did not choose) and says why in the main area."""


def uploaded_model_path() -> str | NoModelError:
    """The uploaded HF config.json as a model-card path, or why there is none (also shown in the sidebar)."""
    upload = st.sidebar.file_uploader("Hugging Face config.json", type=["json"], key="model_upload")
    if upload is None:
        st.sidebar.caption("Upload a config.json to plan a model that is not in the catalogue.")
        return NoModelError(
            "Hugging Face config.json: none uploaded; upload one in the sidebar to plan it, or set Model "
            "source to catalogue"
        )
    try:
        card = uploads.model_card_from_config(upload.getvalue(), name=upload.name, directory=upload_dir())
    except KvplanError as exc:
        st.sidebar.error(dashboard.dashboard_message(exc))
        return NoModelError(f"Hugging Face config.json not imported, nothing planned: {exc}")
    st.sidebar.success(f"Imported {card.id}")
    return uploads.model_card_path(card, directory=upload_dir())


def sidebar_model(model_ids: list[str]) -> str | NoModelError:
    """Model id from the catalogue, a path to the card imported from an uploaded config.json, or why the
    upload gave none (the catalogue's selection is kept for when the source is switched back)."""
    source = st.sidebar.radio(
        "Model source", ["catalogue", "upload config.json"], horizontal=True, key="model_source"
    )
    if source == "upload config.json":
        keep_unshown(["model"])
        return uploaded_model_path()
    index = model_ids.index(DEFAULT_MODEL) if DEFAULT_MODEL in model_ids else 0
    return str(st.sidebar.selectbox("Model", model_ids, index=index, key="model"))


def override_input(label: str, *, step: float, key: str) -> float | None:
    """An optional override of a datasheet number (empty: keep the datasheet's)."""
    return st.number_input(label, min_value=1.0, value=None, step=step, key=key, placeholder="datasheet")


def sidebar_card(card_ids: list[str]) -> tuple[str, float | None, float | None]:
    """(card id or uploaded profile path, capacity override GiB, bandwidth override GB/s)."""
    index = card_ids.index(DEFAULT_CARD) if DEFAULT_CARD in card_ids else 0
    card = str(st.sidebar.selectbox("Card", card_ids, index=index, key="card"))
    with st.sidebar.expander("Card overrides / calibrated profile"):
        memory_gib = override_input("Memory capacity (GiB)", step=8.0, key="memory_gib")
        bandwidth = override_input("Memory bandwidth (GB/s)", step=100.0, key="bandwidth_gbps")
        upload = st.file_uploader("Calibrated profile (YAML)", type=["yaml", "yml"], key="card_upload")
    if upload is not None:
        card = str(uploads.save_upload(upload.getvalue(), name=upload.name, directory=upload_dir()))
    return card, memory_gib, bandwidth


# The Engine settings' widgets: key -> default (the memory fraction's key and default are the engine's).
ENGINE_DEFAULTS: dict[str, Any] = {
    "engine": DEFAULT_ENGINE,
    "block_size": 128,
    "mtp": 0,
    "mtp_acceptance": 0.7,
    "prompt": "",
    "uncalibrated": False,
}


DRAFTING_KEY = "_drafting"  # the slider's key suffix where drafting changes the engine's default


def fraction_key(
    engine: str, *, card: str = "", tp: int = 1, drafting: bool = False, memory_gib: float | None = None
) -> str:
    """Widget key of the memory-fraction slider: one per engine whose own setting is a constant (MindIE,
    vLLM), so switching engine shows its default and a value set stays; one per deployment for an engine
    whose default is computed from it (SGLang's mem_fraction_static: card, tp, memory capacity, MTP
    drafting), so the slider starts at the value the CLI computes for the same flags (a keyed slider keeps
    its value when only its default changes) and a value set there applies to that deployment only."""
    key = f"memory_fraction_{engine}"
    own = engine_fraction(engine, card=card, tp=tp, drafting=drafting, memory_gib=memory_gib)
    if own == registry.default_memory_fraction(parse_engine(engine)):
        return key
    return f"{key}{DRAFTING_KEY if drafting else ''}_{card}_{tp}_{memory_gib}"


def keep_unshown(keys: list[str]) -> None:
    """Keep the values of widgets this run does not draw: Streamlit drops a widget's state at the end of a
    run that does not draw it, unless the key is written through the Session State API in that run."""
    for key in keys:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def engine_fraction(
    engine: str, *, card: str, tp: int, drafting: bool = False, memory_gib: float | None = None
) -> float:
    """The engine's own memory setting on the card (with the page's capacity override, as --memory-gib) at
    tp, with or without MTP drafting, the slider's default: a constant (MindIE, vLLM) or SGLang's
    mem_fraction_static formula (registry.deployment_memory_fraction, as the CLI's plan asks it); the
    constant where the card cannot be read or SGLang's formula leaves nothing (its refusal is the plan's)."""
    name = parse_engine(engine)
    try:
        hardware = inputs.apply_overrides(
            catalog.resolve_card(card), memory_gib=memory_gib, bandwidth_gbps=None
        )
        return registry.deployment_memory_fraction(
            name, hardware, ranks=(tp, 1, 1), prefill_tokens=None, drafting=drafting
        )
    except KvplanError:
        return registry.default_memory_fraction(name)


def engine_widgets(*, card: str, tp: int, memory_gib: float | None) -> None:
    """The Engine settings' widgets (drawn only while their expander is open; values in session state)."""
    drafting = int(st.session_state.get("mtp", 0)) > 0
    where = {"card": card, "tp": tp, "drafting": drafting, "memory_gib": memory_gib}
    engine = st.selectbox(
        "Engine",
        list(ENGINES),
        index=ENGINES.index(DEFAULT_ENGINE),
        key="engine",
        help="Whose block accounting sizes the max batch (and whose kernels the speed model uses).",
    )
    st.slider(
        "Memory fraction (MindIE NPU_MEMORY_FRACTION, vLLM --gpu-memory-utilization, SGLang "
        "--mem-fraction-static)",
        0.5,
        1.0,
        engine_fraction(str(engine), **where),  # the engine's own default
        0.01,
        key=fraction_key(str(engine), **where),
    )
    st.selectbox("KV block size (tokens)", [16, 32, 64, 128], index=3, key="block_size")
    st.number_input("MTP draft tokens", min_value=0, max_value=8, value=0, key="mtp")
    st.slider("MTP acceptance", 0.0, 1.0, 0.7, 0.01, key="mtp_acceptance")
    st.text_input("Prompt tokens for TTFT", value="", key="prompt", placeholder="256 (the default workload)")
    st.toggle("Ignore measured coefficients", value=False, key="uncalibrated")


def sidebar_advanced(*, card: str, tp: int, memory_gib: float | None) -> dict[str, Any]:
    """Engine knobs that rarely change (engine, memory fraction, block size, MTP, calibration, prompt).

    A lazy expander (on_change="rerun"): its seven widgets are drawn only while it is open, so the first
    page of a new session does not build them (two sliders among them); closed, the values set while it
    was open still apply (keep_unshown), and untouched ones are the defaults.
    """
    state = st.session_state
    engine = str(state.get("engine", DEFAULT_ENGINE))
    where = {"card": card, "tp": tp, "drafting": int(state.get("mtp", 0)) > 0, "memory_gib": memory_gib}
    keys = [*ENGINE_DEFAULTS, *(fraction_key(e, **where) for e in ENGINES)]
    expander = st.sidebar.expander("Engine settings", key="engine_settings", on_change="rerun")
    if expander.open:
        with expander:
            engine_widgets(card=card, tp=tp, memory_gib=memory_gib)
        engine = str(state["engine"])
    else:
        keep_unshown(keys)
    values = {key: state.get(key, default) for key, default in ENGINE_DEFAULTS.items()}
    where["drafting"] = int(values["mtp"]) > 0
    fraction = state.get(fraction_key(engine, **where), engine_fraction(engine, **where))
    return {
        "engine": engine,
        "memory_fraction": float(fraction),
        "block_size": int(values["block_size"]),
        "mtp": int(values["mtp"]),
        "mtp_acceptance": float(values["mtp_acceptance"]),
        "calibrated": not values["uncalibrated"],
        "prompt": values["prompt"] or None,
    }


def sidebar() -> Settings:
    """All the sidebar controls, gathered into one request plus the SLOs."""
    model_ids, card_ids = catalogue()
    st.sidebar.title("kvplan")
    model = sidebar_model(model_ids)
    card, memory_gib, bandwidth = sidebar_card(card_ids)
    shape = sidebar_shape()
    tpot, ttft = sidebar_slos()
    extra = sidebar_advanced(card=card, tp=int(shape["tp"]), memory_gib=memory_gib)
    if isinstance(model, NoModelError):
        raise model  # the whole sidebar is drawn; the main area says why nothing is planned
    prompt = extra.pop("prompt")
    req = PlanRequest(
        model=model, card=card, memory_gib=memory_gib, bandwidth_gbps=bandwidth, **shape, **extra
    )
    return Settings(req=req, tpot_slo_ms=tpot, ttft_slo_ms=ttft, prompt=prompt)


def sidebar_shape() -> dict[str, Any]:
    """PlanRequest's fields from the shape widgets: weight and KV dtype, tp, context length, batch."""
    choices = [AUTO_DTYPE, *WEIGHT_SCHEMES]  # auto: the card's 16-bit dtype, as the CLI's default
    dtype = st.sidebar.selectbox(
        "Weight dtype",
        choices,
        index=choices.index(DEFAULT_WEIGHT_DTYPE),
        key="dtype",
        help="\n".join(
            ["- **auto**: the card's 16-bit dtype (bf16, else fp16)"]
            + [f"- **{n}**: {s.description}" for n, s in WEIGHT_SCHEMES.items()]
        ),
    )
    kv_dtype = st.sidebar.selectbox("KV-cache dtype", KV_DTYPE_CHOICES, index=0, key="kv_dtype")
    tp = st.sidebar.selectbox("Tensor parallel (tp)", TP_CHOICES, index=0, key="tp")
    ctx = st.sidebar.selectbox(
        "Context length (tokens)",
        CTX_CHOICES,
        index=CTX_CHOICES.index("32k"),
        key="ctx",
        accept_new_options=True,
        help="Type any length: 48k, 100000 ...",
    )
    batch = st.sidebar.number_input(
        "Batch (concurrent sequences)",
        min_value=1,
        value=None,
        step=1,
        key="batch",
        placeholder="largest that fits",
    )
    return {
        "dtype": str(dtype),
        "kv_dtype": None if kv_dtype == "auto" else kv_dtype,
        "tp": int(tp),
        "ctx": str(ctx),
        "batch": int(batch) if batch else None,
    }


def sidebar_slos() -> tuple[float, float]:
    """(TPOT SLO ms, TTFT SLO ms), side by side."""
    slo_left, slo_right = st.sidebar.columns(2)
    tpot = slo_left.number_input(
        "TPOT SLO (ms)", min_value=1.0, value=DEFAULT_TPOT_MS, step=5.0, key="tpot_slo"
    )
    ttft = slo_right.number_input(
        "TTFT SLO (ms)", min_value=1.0, value=DEFAULT_TTFT_MS, step=100.0, key="ttft_slo"
    )
    return float(tpot), float(ttft)
