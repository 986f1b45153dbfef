"""The torch / torch_npu / CANN check and the per-SoC benchmark plan: pure functions, no torch needed."""

from __future__ import annotations

import platform
import re
from pathlib import Path

import pytest

from calibration import npu_caps, npu_env
from calibration.npu_env import COMPAT_TABLE, Installed


def _installed(torch: str = "", torch_npu: str = "", cann: str = "") -> Installed:
    return Installed(torch=torch, torch_npu=torch_npu, cann=cann, cann_source="test")


@pytest.mark.parametrize("row", COMPAT_TABLE, ids=lambda r: f"{r.torch_npu}-cann{r.cann}")
def test_every_published_pairing_passes(row: npu_env.CompatRow) -> None:
    found = npu_env.compat_findings(
        _installed(torch=f"{row.torch}+cpu", torch_npu=row.torch_npu, cann=row.cann)
    )
    assert [f.level for f in found] == ["ok", "ok"], found


def test_torch_that_does_not_match_the_torch_npu_pin_is_an_error_with_the_exact_install() -> None:
    found = npu_env.compat_findings(_installed(torch="2.6.0", torch_npu="2.5.1.post1", cann="8.2.RC1"))
    assert found[0].level == "error"
    # torch_npu 2.5.1.post1 pins torch 2.5.1 (the wheel's base version)
    assert "torch 2.6.0 does not match torch_npu 2.5.1.post1" in found[0].text
    assert "pip install 'torch==2.5.1'" in found[0].text and "+cpu' --index-url" in found[0].text


def test_cann_line_without_this_torch_npu_says_which_row_to_install() -> None:
    # torch_npu 2.5.1 is published for CANN 8.1.RC1 only; on CANN 8.0.0 the first 8.0.0 row is recommended
    found = npu_env.compat_findings(_installed(torch="2.5.1", torch_npu="2.5.1", cann="8.0.0"))
    first_800 = next(r for r in COMPAT_TABLE if r.cann == "8.0.0")
    assert found[1].level == "error"  # a torch_npu built for another CANN line does not load its kernels
    assert "published for CANN 8.1.RC1, not 8.0.0" in found[1].text
    assert f"torch-npu=={first_800.torch_npu}" in found[1].text


def test_missing_torch_npu_names_the_row_for_the_installed_cann() -> None:
    found = npu_env.compat_findings(_installed(torch="2.9.0", cann="8.5.0"))
    newest_850 = next(r for r in COMPAT_TABLE if r.cann == "8.5.0")
    assert [f.level for f in found] == ["error"]
    assert f"for CANN 8.5.0: pip install torch-npu=={newest_850.torch_npu}" in found[0].text


@pytest.mark.parametrize("torch_npu", ["2.13.0", "2.14.0"])
def test_a_plain_pip_torch_npu_on_cann_8_is_not_ready(torch_npu: str) -> None:
    """`pip install torch-npu` picks today's 2.13/2.14; no CANN 8.5.0 release is that version."""
    found = npu_env.compat_findings(_installed(torch=torch_npu, torch_npu=torch_npu, cann="8.5.0"))
    assert found[1].level == "error"
    assert f"torch_npu {torch_npu} is not published for CANN 8.5.0" in found[1].text
    assert "pip install torch-npu==2.9.0" in found[1].text


def test_cann_9_0_0_rows_are_the_official_tables() -> None:
    """Ascend/pytorch COMPATIBILITY.md (master 9e73e70, 2026-08-21): CANN 9.0.0 pairs with torch_npu
    2.9.0.post2 / 2.8.0.post4 / 2.7.1.post4 (Ascend Extension 26.0.0), 2.9.0.post2 recommended; CANN 9.1.0
    with 2.12.0 / 2.11.0 / 2.10.0.post4 / 2.9.0.post6 / 2.7.1.post8 (26.1.0)."""
    assert [r.torch_npu for r in npu_env.rows_for_cann("9.0.0")] == [
        "2.9.0.post2",
        "2.8.0.post4",
        "2.7.1.post4",
    ]
    assert {r.extension for r in npu_env.rows_for_cann("9.0.0")} == {"26.0.0"}
    assert [r.torch_npu for r in npu_env.rows_for_cann("9.1.0")] == [
        "2.12.0", "2.11.0", "2.10.0.post4", "2.9.0.post6", "2.7.1.post8",
    ]  # fmt: skip
    assert "COMPATIBILITY.md" in npu_env.TABLE_SOURCE and "2026-08-21" in npu_env.TABLE_SOURCE


def test_the_install_table_in_calibration_readme_is_compat_table() -> None:
    """calibration/README.md's per-CANN install table lists exactly COMPAT_TABLE's rows, recommended first."""
    readme = (Path(__file__).resolve().parents[1] / "calibration" / "README.md").read_text()
    rows = [line.split("|")[1:4] for line in readme.splitlines() if re.match(r"^\| \d+\.\d+\.\w+ \|", line)]
    lines = list(dict.fromkeys(r.cann for r in COMPAT_TABLE))
    assert [cann.strip() for cann, _, _ in rows] == lines
    for cann, first, others in rows:
        published = [r.torch_npu for r in npu_env.rows_for_cann(cann.strip())]
        assert first.split()[0] == published[0]
        assert re.findall(r"\d+\.\d+\.\d+(?:\.post\d+)?", others.split("(")[0]) == published[1:], cann


def test_torch_npu_2_10_0_on_cann_9_0_0_is_not_ready_and_names_the_official_row() -> None:
    """2.10.0 sat under CANN 9.0.0 in the README for a month (2026-06-16 to 07-20); the table that replaced
    it has no such release: not ready, install 2.9.0.post2."""
    found = npu_env.compat_findings(_installed(torch="2.10.0", torch_npu="2.10.0", cann="9.0.0"))
    assert found[0].level == "ok" and found[1].level == "error"
    assert "torch_npu 2.10.0 is not published for CANN 9.0.0" in found[1].text
    assert "2.9.0.post2, 2.8.0.post4, 2.7.1.post4" in found[1].text
    assert "pip install torch-npu==2.9.0.post2 'torch==2.9.0'" in found[1].text
    assert npu_env.TABLE_SOURCE in found[1].text


def test_task_queue_2_is_a_blocking_setting() -> None:
    assert npu_env.settings_findings({"TASK_QUEUE_ENABLE": "1"}) == []
    (finding,) = npu_env.settings_findings({"TASK_QUEUE_ENABLE": "2"})
    assert finding.level == "error" and "export TASK_QUEUE_ENABLE=1" in finding.text


def test_unknown_torch_npu_and_unknown_cann_are_warnings_not_errors() -> None:
    newer = npu_env.compat_findings(_installed(torch="2.99.0", torch_npu="2.99.0", cann="9.9.0"))
    assert [f.level for f in newer] == ["ok", "warn"] and "not in kvplan's version table" in newer[1].text
    no_cann = npu_env.compat_findings(_installed(torch="2.5.1", torch_npu="2.5.1"))
    assert no_cann[1].level == "warn" and "CANN version not found" in no_cann[1].text


@pytest.mark.parametrize(
    ("text", "line"),
    [("8.1.RC1", (8, 1)), ("8.0.0", (8, 0)), ("9.1.0", (9, 1)), ("8.0.RC3", None), ("x", None)],
)
def test_cann_line(text: str, line: tuple[int, int] | None) -> None:
    assert npu_env.cann_line(text) == line


def test_cann_version_is_read_from_the_toolkit_install_info(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / f"{platform.machine() or 'x86_64'}-linux" / "ascend_toolkit_install.info"
    info.parent.mkdir()
    info.write_text("package_name=Ascend-cann-toolkit\nversion=8.1.RC1\ninnerversion=V100R001C21\n")
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path))
    assert npu_env.cann_from_files() == ("8.1.RC1", str(info))


def test_950_needs_cann_9() -> None:
    blocked = npu_env.soc_findings("Ascend950PR", "8.5.0")
    assert len(blocked) == 1 and blocked[0].level == "error" and "CANN >= 9.0.0" in blocked[0].text
    assert npu_env.soc_findings("Ascend950PR", "9.0.0") == []
    assert npu_env.soc_findings("Ascend910B4", "8.0.0") == []


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("Ascend910B4", "910b"),
        ("Ascend910_9392", "910c"),
        ("Ascend950PR", "950"),
        ("Ascend310P3", "310p"),
        ("Tesla", "unknown"),
    ],
)
def test_soc_family(name: str, family: str) -> None:
    assert npu_caps.soc_family(name) == family


def test_plan_per_soc_dtypes_and_reasons() -> None:
    b4, p3, pr = (npu_caps.caps_for(n) for n in ("Ascend910B4", "Ascend310P3", "Ascend950PR"))
    assert "fp8" not in b4.gemm_dtypes and "fp8" in pr.gemm_dtypes  # fp8 only on the 950
    assert p3.compute_dtype == "fp16" and "bf16" not in p3.gemm_dtypes  # no bf16 on the 310P
    assert b4.decision("decode attention") == ("measure", "")
    assert pr.decision("grouped expert GEMM")[0] == "attempt"  # the A2/A3 op docs do not list the 950
    lines = npu_caps.plan_lines(b4, devices=1)
    assert any(line.startswith("all-reduce") and "skip: 1 device visible" in line for line in lines)
