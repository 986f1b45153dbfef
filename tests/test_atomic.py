"""planner.atomic: atomic writes, no clobbering without force, backups that never overwrite each other."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from planner import atomic
from planner.errors import OutputExistsError, PlanInputError
from tests.helpers import kvplan


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_new_file_is_written_with_0640(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    previous = os.umask(0o022)
    try:
        assert atomic.write_atomic(target, "{}\n") is None
    finally:
        os.umask(previous)
    assert target.read_text() == "{}\n"
    assert (target.stat().st_mode & 0o777) == atomic.NEW_FILE_MODE == 0o640
    assert leftovers(tmp_path) == []


def test_a_new_file_keeps_to_the_users_umask(tmp_path: Path) -> None:
    """Under umask 077 a new file is 0600 (0640 less the umask), never group-readable."""
    previous = os.umask(0o077)
    try:
        atomic.write_atomic(tmp_path / "private.json", "{}\n")
    finally:
        os.umask(previous)
    assert ((tmp_path / "private.json").stat().st_mode & 0o777) == 0o600


def test_existing_file_is_refused_and_untouched(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    target.write_text("old")
    with pytest.raises(
        OutputExistsError,
        match=rf"^{target}: already exists \(got an existing file, expected a new "
        r"path\); pass --force to replace it \(the old file is then kept as "
        r"config\.json\.bak\)$",
    ):
        atomic.write_atomic(target, "new")
    assert target.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_force_keeps_numbered_backups_and_mode(tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    target.write_text("v1")
    os.chmod(target, 0o600)
    assert atomic.write_atomic(target, "v2", force=True) == tmp_path / "config.json.bak"
    assert atomic.write_atomic(target, "v3", force=True) == tmp_path / "config.json.bak.1"
    assert atomic.write_atomic(target, b"v4", force=True) == tmp_path / "config.json.bak.2"
    contents = [
        (tmp_path / n).read_text() for n in ("config.json.bak", "config.json.bak.1", "config.json.bak.2")
    ]
    assert contents == ["v1", "v2", "v3"]
    assert target.read_text() == "v4"
    assert (target.stat().st_mode & 0o777) == 0o600  # a replaced file keeps its permissions
    assert leftovers(tmp_path) == []


def test_failed_replace_leaves_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "config.json"
    target.write_text("old")

    def broken_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        atomic.write_atomic(target, "new", force=True)
    assert target.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_race_on_a_new_name_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The name appears between the existence check and the link: the link fails, nothing is overwritten."""
    target = tmp_path / "config.json"
    real_link = os.link

    def racing_link(src: object, dst: object) -> None:
        Path(str(dst)).write_text("someone else")
        real_link(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(atomic.os, "link", racing_link)
    with pytest.raises(OutputExistsError):
        atomic.write_atomic(target, "mine")
    assert target.read_text() == "someone else"
    assert leftovers(tmp_path) == []


def test_missing_directory_and_directory_target(tmp_path: Path) -> None:
    with pytest.raises(PlanInputError, match=r": directory .* does not exist \(got a missing directory"):
        atomic.write_atomic(tmp_path / "nope" / "config.json", "{}")
    with pytest.raises(
        PlanInputError,
        match=r": not a regular file \(got a directory, expected a regular file or a new path\)",
    ):
        atomic.write_atomic(tmp_path, "{}", force=True)


def test_relative_path_in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    atomic.write_atomic(Path("out.json"), "x")
    assert (tmp_path / "out.json").read_text() == "x"


def test_a_dash_is_refused_as_an_output_path_by_every_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'-' reads as stdout in most tools; kvplan refuses it in one line naming the flag, and writes no file
    named '-' (mindie -o, simulate --out / --timeline-out, models import --out, calibrate --from-log)."""
    from typer.testing import CliRunner

    from planner.cli import app
    from tests.test_vllm_startup import LOG_10517

    monkeypatch.chdir(tmp_path)
    log = tmp_path / "startup.log"
    log.write_text(LOG_10517, encoding="utf-8")
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(
        '{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024, '
        '"num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, '
        '"intermediate_size": 3072, "vocab_size": 151936, "max_position_embeddings": 40960, '
        '"torch_dtype": "bfloat16", "tie_word_embeddings": true}',
        encoding="utf-8",
    )
    runs = {
        "-o/--out": ["mindie", "-m", "qwen3-8b", "--weights-path", "/w", "-o", "-"],
        "--out": ["simulate", "-m", "qwen3-8b", "--rate", "1", "--num-requests", "5", "--out", "-"],
        "--timeline-out": [
            "simulate",
            "-m",
            "qwen3-8b",
            "--rate",
            "1",
            "--num-requests",
            "5",
            "--timeline-out",
            "-",
        ],
    }
    for flag, args in runs.items():
        result = CliRunner().invoke(app, args)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert (
            result.exit_code == 2 and len(lines) == 1 and lines[0].startswith(f"kvplan: error: {flag}: '-'")
        )
    for args in (
        ["models", "import", str(hf), "--out", "-"],
        ["calibrate", "--from-log", str(log), "--card", "nvidia-l40s", "--out", "-"],
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "'-' is not a file name" in result.output, (args, result.output)
    assert not (tmp_path / "-").exists()


def test_empty_out_path_is_named_as_empty() -> None:
    """`calibrate --out ""` said "--out: .: not a regular file (got a directory ...)": '' reaches the check as
    '.', and the message now says the path is empty, whichever command gave it."""
    with pytest.raises(
        PlanInputError, match=r"^--out: no file name \(got an empty path or '\.', expected a file"
    ):
        atomic.check_new({"--out": Path("")}, force=True)
    out = kvplan("calibrate --card ascend-950pr --out", "", code=2)
    assert "--out: no file name (got an empty path" in out.output
