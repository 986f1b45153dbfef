"""The `fake_npu` pytest fixture: puts tests/fake_npu on sys.path, sets the fake's defaults, and removes
torch_npu and torch.npu again afterwards so no other test sees an NPU."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FAKE_DIR = Path(__file__).resolve().parent
FAKE_ENV = (
    "FAKE_NPU_SOC",
    "FAKE_NPU_VERSION",
    "FAKE_NPU_CANN",
    "FAKE_NPU_COUNT",
    "FAKE_NPU_TOTAL_GIB",
    "FAKE_NPU_OOM_BYTES",
    "FAKE_NPU_FAIL",
    "TASK_QUEUE_ENABLE",
    "ASCEND_LAUNCH_BLOCKING",
    "HCCL_OP_EXPANSION_MODE",
    "ASCEND_TOOLKIT_HOME",
    "ASCEND_HOME_PATH",
)


def _fake_sizes() -> object:
    from calibration.shapes import TINY

    # TINY with fewer rotated weight copies and repeats: every call path runs, in a fraction of the time
    return dataclasses.replace(
        TINY, rotate_bytes=64 * 1024, stream_bytes=1024 * 1024, small_kernels=11, repeats=2
    )


FAKE_SIZES = _fake_sizes()


def drop_fake(torch: Any) -> None:
    """Forget the fake torch_npu (modules, torch.npu and its 310P bf16 guard) so the next import starts
    fresh."""
    fake = sys.modules.get("torch_npu")
    guard = getattr(fake, "BF16_GUARD", None)
    if guard is not None:
        guard.__exit__(None, None, None)
    for name in [n for n in sys.modules if n == "torch_npu" or n.startswith("torch_npu.")]:
        del sys.modules[name]
    if hasattr(torch, "npu"):
        delattr(torch, "npu")


# A CANN line the version table does not list: a torch_npu newer than the table is then "not checked"
# (a warning), as on a real machine with a CANN newer than kvplan's table.
FUTURE_CANN = "99.0.0"


def cann_publishing(torch_npu: str) -> str:
    """The CANN line whose published torch_npu releases include `torch_npu` (the installed torch's
    version), so the fake's default stack is a consistent one; a future line when none does."""
    from calibration.npu_env import COMPAT_TABLE

    return next((row.cann for row in COMPAT_TABLE if row.torch_npu == torch_npu), FUTURE_CANN)


@pytest.fixture(name="fake_npu")
def fake_npu_fixture(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[pytest.MonkeyPatch]:
    """A fake 910B4 (32 GiB, one device) whose torch_npu matches the installed torch, on the CANN line that
    publishes that torch_npu (cann_publishing);
    tests change it through monkeypatch.setenv before opening the device."""
    torch = pytest.importorskip("torch")
    for key in FAKE_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path / "no-cann"))  # the host's CANN never leaks in
    version = torch.__version__.split("+")[0]
    monkeypatch.setenv("FAKE_NPU_VERSION", version)  # the pin torch_npu wheels carry
    monkeypatch.setenv("FAKE_NPU_CANN", cann_publishing(version))
    monkeypatch.setenv("KVPLAN_CALIBRATE_SIZES", "tiny")
    monkeypatch.setattr("calibration.calibrate.TINY", FAKE_SIZES)
    monkeypatch.syspath_prepend(str(FAKE_DIR))
    drop_fake(torch)
    yield monkeypatch
    drop_fake(torch)
