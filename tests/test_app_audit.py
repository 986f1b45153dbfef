"""The dashboard against the CLI where an audit (h64) found them apart: the checkpoint path, SGLang with MTP,
the Plan (JSON) download, a failed config.json upload, and CLI flags in the page's messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.delta_generator import DeltaGenerator
from streamlit.runtime import memory_media_file_storage as media
from streamlit.testing.v1 import AppTest

from planner import units
from tests.helpers import kvplan

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TIMEOUT_S = 60
PAGE_FLAGS = "--model qwen3.5-27b --card ascend-950pr --dtype fp8 --tp 1 --ctx 32k"


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """file name -> bytes of every download button the page offers (recorded as Streamlit stores them)."""
    seen: dict[str, bytes] = {}
    store = media.MemoryMediaFileStorage.load_and_get_id

    def record(self: Any, data: Any, mimetype: str, kind: Any, filename: str | None = None) -> str:
        if filename:
            seen[filename] = data if isinstance(data, bytes) else str(data).encode()
        return store(self, data, mimetype, kind, filename)

    monkeypatch.setattr(media.MemoryMediaFileStorage, "load_and_get_id", record)
    return seen


def page(state: dict[str, Any], *, tab: str | None = None) -> AppTest:
    """The page run once with these session-state values (the Engine settings expander open)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    for key, value in {**state, "engine_settings": True, **({"tab": tab} if tab else {})}.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def labels(at: AppTest) -> list[str]:
    return [b.proto.label for b in at.sidebar.get("download_button")]


def messages(at: AppTest) -> list[str]:
    """Every error, warning and info on the page, the sidebar's included."""
    return [m.value for kind in ("error", "warning", "info") for m in at.get(kind)]


@pytest.mark.parametrize("path", ["", "   "])
def test_a_cleared_checkpoint_path_offers_no_engine_file(path: str) -> None:
    kvplan("mindie -m qwen3.5-27b --weights-path", path, "-o", "/dev/null", code=2)
    at = page({"weights_path": path, "weights_path_model": "qwen3.5-27b"})
    assert "MindIE config.json" not in labels(at) and "vllm-ascend command" not in labels(at)
    assert "Plan (JSON)" in labels(at)
    said = [m for m in messages(at) if "Checkpoint path on the server" in m]
    assert len(said) == 1 and "--" not in said[0]
    assert not [m for m in messages(at) if "checkpoint of" in m]  # the vLLM export's confusing warning


@pytest.mark.parametrize(
    ("model", "tp", "dtype", "mtp"),
    [("qwen3.5-27b", 1, "fp8", 1), ("qwen3.5-27b", 1, "fp8", 3), ("qwen3-next-80b-a3b", 2, "fp8", 2)],
)
def test_sglang_with_mtp_plans_as_the_cli(model: str, tp: int, dtype: str, mtp: int) -> None:
    at = page({"model": model, "tp": tp, "dtype": dtype, "engine": "sglang", "mtp": mtp})
    flags = f"-m {model} --tp {tp} --dtype {dtype} --ctx 32k --engine sglang --mtp {mtp} --mtp-acceptance 0.7"
    cli = json.loads(kvplan(flags + " --json").output)
    shown = {m.label: m.value for m in at.metric}
    assert shown["max batch"] == str(cli["recommendation"]["max_batch_size"])
    assert shown["KV budget"] == f"{units.bytes_to_gib(cli['memory']['kv_budget_bytes']):.1f} GiB"
    assert shown["TPOT (ms)"] == units.fmt_figures(units.s_to_ms(cli["performance"]["tpot_s"]))
    sliders = [s for s in at.slider if s.label.startswith("Memory fraction")]
    assert [s.value for s in sliders] == [cli["memory_fraction"]]


@pytest.mark.parametrize(
    ("state", "flags"),
    [
        ({}, ""),
        ({"engine": "vllm", "kv_dtype": "int8", "batch": 8}, "--engine vllm --kv-dtype int8 --batch 8"),
        ({"block_size": 64, "mtp": 1}, "--block-size 64 --mtp 1 --mtp-acceptance 0.7"),
    ],
)
def test_the_plan_json_download_is_kvplan_json(
    downloads: dict[str, bytes], state: dict[str, Any], flags: str
) -> None:
    page(state)
    cli = json.loads(kvplan(f"{PAGE_FLAGS} {flags} --json").output)
    assert json.loads(downloads["kvplan-qwen3.5-27b.json"]) == cli
    assert cli["load_knee"] and cli["engine_config"]


class _Upload:
    def __init__(self, data: bytes, name: str) -> None:
        self.data, self.name = data, name

    def getvalue(self) -> bytes:
        return self.data


@pytest.mark.parametrize("upload", [None, b"not json", b"{}"])
def test_an_upload_that_failed_plans_no_other_model(
    monkeypatch: pytest.MonkeyPatch, downloads: dict[str, bytes], upload: bytes | None
) -> None:
    drawn = DeltaGenerator.file_uploader

    def uploader(self: DeltaGenerator, label: str, *args: Any, key: str | None = None, **kw: Any) -> Any:
        drawn(self, label, *args, key=key, **kw)
        return _Upload(upload, "bad.json") if key == "model_upload" and upload is not None else None

    monkeypatch.setattr(DeltaGenerator, "file_uploader", uploader)
    at = page({"model_source": "upload config.json"})
    assert not at.metric and not labels(at) and not downloads
    assert "qwen3.5-27b" not in " ".join(t.value for t in at.title)
    main = [m.value for m in [*at.main.error, *at.main.info]]
    assert len(main) == 1 and "config.json" in main[0]
    assert upload is None or "bad.json" in main[0]


@pytest.mark.parametrize(
    ("state", "tab", "said"),
    [
        ({"ctx": "7"}, "Speed", "TPOT SLO (ms)"),
        ({"engine": "vllm", "batch": 1000000}, None, "Batch"),
        ({"ctx": "999999999"}, None, "Context length"),
        ({"prompt": "abc"}, None, "Prompt tokens for TTFT: not a token count"),
        ({"prompt": "1.5"}, None, "Prompt tokens for TTFT: not a token count"),
    ],
)
def test_page_messages_name_the_widgets_not_cli_flags(
    state: dict[str, Any], tab: str | None, said: str
) -> None:
    at = page(state, tab=tab)
    errors = [e.value for e in at.error]
    assert errors and said in errors[0]
    assert not [e for e in errors if "--" in e or "kvplan " in e or e.startswith("prompt tokens")]


def test_the_load_tabs_pd_run_stops_at_the_pages_step_budget() -> None:
    """h64 finding 3: 131072 + 32768-token requests at P:D 1:3 took 34-80 s a change (524 000 fleet steps),
    with no way to cancel; the page now stops at PAGE_PD_LOOPS steps and says what to run instead. A usual
    shape still draws."""
    from dashboard import load
    from dashboard.words import dashboard_message
    from planner.errors import PlanInputError
    from planner.inputs import PlanRequest

    req = PlanRequest(model="qwen3.5-27b", dtype="fp8", ctx="192k")
    with pytest.raises(PlanInputError) as refused:
        load.open_loop(req, "mindie", (131072, 32768, 1000.0, 400), "1:3")
    shown = dashboard_message(refused.value)
    assert f"more than {load.PAGE_PD_LOOPS} simulator steps" in shown and "`kvplan simulate`" in shown
    drawn = load.open_loop(req, "mindie", (1024, 256, 2.0, 400), "1:3")
    assert drawn["summary"].requests == 400
