"""planner/catalog_cache.py: a catalogue look-up read back from its cache entry equals the validated one,
and any change to a file it read, a failure, or a damaged entry sends it back to the YAML."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from planner import catalog, catalog_cache
from planner.errors import DataFileError

ROOT = Path(__file__).resolve().parents[1]


def clear_catalog_caches() -> None:
    for cached in (catalog._files, catalog.load_model, catalog._alias_map, catalog.load_card):
        cached.cache_clear()
    catalog.fitted_profile.cache_clear()
    catalog.variant_map.cache_clear()


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Entries go to a temporary folder, written even where Python writes no bytecode."""
    folder = tmp_path / "cache"
    monkeypatch.setattr(catalog_cache, "CACHE_DIR", folder)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    clear_catalog_caches()
    yield folder
    clear_catalog_caches()


def counted_look_up(value: object, calls: list[int]) -> object:
    calls.append(1)
    return value


def test_an_entry_is_used_while_its_data_files_are_unchanged(cache_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "card.yaml"
    data.write_text("id: card\n")
    calls: list[int] = []

    def remembered() -> object:
        return catalog_cache.remembered(
            "model-card", data_files=lambda: [data], look_up=lambda: counted_look_up({"n": 1}, calls)
        )

    assert remembered() == {"n": 1} and remembered() == {"n": 1}
    assert len(calls) == 1 and (cache_dir / "catalog-model-card.pickle").is_file()
    data.write_text("id: card\n")  # same bytes, same size: ctime still moves
    assert remembered() == {"n": 1} and len(calls) == 2
    data.unlink()
    assert remembered() == {"n": 1} and len(calls) == 3  # a file gone: looked up, not cached


def test_failures_and_odd_keys_are_never_stored(cache_dir: Path) -> None:
    def failing() -> object:
        raise DataFileError("modelcards/x.yaml: broken")

    for _ in range(2):
        with pytest.raises(DataFileError, match="broken"):
            catalog_cache.remembered("model-x", data_files=list, look_up=failing)
    calls: list[int] = []
    for key in ("../escape", "Model-X", ""):
        catalog_cache.remembered(key, data_files=list, look_up=lambda: counted_look_up(1, calls))
    assert len(calls) == 3 and not cache_dir.exists()


def test_a_damaged_entry_is_rebuilt(cache_dir: Path) -> None:
    cache_dir.mkdir()
    (cache_dir / "catalog-model-x.pickle").write_bytes(b"\x80\x05garbage")
    calls: list[int] = []
    for _ in range(2):
        assert (
            catalog_cache.remembered("model-x", data_files=list, look_up=lambda: counted_look_up(7, calls))
            == 7
        )
    assert len(calls) == 1


def test_cached_look_ups_equal_validated_ones(cache_dir: Path) -> None:
    cold = catalog.resolve_model("qwen3-27b"), catalog.resolve_card("ascend-950pr", engine="mindie")
    clear_catalog_caches()
    warm = catalog.resolve_model("qwen3-27b"), catalog.resolve_card("ascend-950pr", engine="mindie")
    assert sorted(p.name for p in cache_dir.iterdir()) == [
        "catalog-card-ascend-950pr-mindie.pickle",
        "catalog-model-qwen3-27b.pickle",
    ]
    assert warm == cold and warm[0][1] == "qwen3-27b" and warm[1].variant_id == cold[1].variant_id


def test_a_card_broken_after_caching_gives_its_error(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cards = tmp_path / "modelcards"
    shutil.copytree(catalog.data_dir("modelcards"), cards)
    real = catalog.data_dir
    monkeypatch.setattr(
        catalog, "data_dir", lambda package: cards if package == "modelcards" else real(package)
    )
    clear_catalog_caches()
    assert catalog.resolve_model("qwen3-27b")[0].id == "qwen3.5-27b"
    target = cards / "qwen3.5-27b.yaml"
    target.write_text(target.read_text() + "surprise_key: 1\n")
    clear_catalog_caches()
    with pytest.raises(DataFileError, match=r"qwen3\.5-27b\.yaml: surprise_key: Extra inputs"):
        catalog.resolve_model("qwen3-27b")


def test_the_catalogue_imports_only_top_level_planner_modules() -> None:
    """The fingerprint stamps planner/*.py only: every module the catalogue's validation can run is there."""
    code = "import sys, planner.catalog; print(' '.join(m for m in sys.modules if m.startswith('planner.')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = done.stdout.split()
    assert "planner.schema_card" in loaded
    assert [name for name in loaded if name.count(".") > 1] == []


@pytest.fixture
def read_only_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The package's bytecode folder cannot be made (its parent is a file, which stops root as well as a
    read-only site-packages stops a user); XDG_CACHE_HOME is a temporary folder. Yields the user's folder."""
    blocker = tmp_path / "site-packages-planner"
    blocker.write_text("not a folder\n")
    monkeypatch.setattr(catalog_cache, "CACHE_DIR", blocker / "__pycache__")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    user = catalog_cache.user_cache_dir()
    assert user is not None and user.parent == tmp_path / "xdg" / "kvplan"
    clear_catalog_caches()
    yield user
    clear_catalog_caches()


def test_a_read_only_install_caches_in_the_users_folder(read_only_install: Path) -> None:
    calls: list[int] = []
    for _ in range(2):
        value = catalog_cache.remembered(
            "model-x", data_files=list, look_up=lambda: counted_look_up(5, calls)
        )
        assert value == 5
    assert len(calls) == 1
    assert [p.name for p in read_only_install.iterdir()] == ["catalog-model-x.pickle"]  # no temporary left
    assert read_only_install.stat().st_mode & 0o777 == 0o700
    cold = catalog.resolve_model("qwen3-27b")
    clear_catalog_caches()
    assert catalog.resolve_model("qwen3-27b") == cold
    assert (read_only_install / "catalog-model-qwen3-27b.pickle").is_file()


def test_the_users_folder_is_keyed_by_version_and_install(
    read_only_install: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catalog_cache, "CODE_DIR", read_only_install / "another-install")
    other = catalog_cache.user_cache_dir()
    assert other is not None and other != read_only_install and other.parent == read_only_install.parent
    monkeypatch.setattr(catalog_cache, "__version__", "9.9.9")
    assert catalog_cache.user_cache_dir() not in (other, read_only_install)
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(read_only_install / "home"))
    assert str(catalog_cache.user_cache_dir()).startswith(
        str(read_only_install / "home" / ".cache" / "kvplan")
    )


def test_stale_or_damaged_user_entries_are_ignored_and_replaced(read_only_install: Path) -> None:
    entry = read_only_install / "catalog-model-x.pickle"
    calls: list[int] = []

    def remembered() -> object:
        return catalog_cache.remembered("model-x", data_files=list, look_up=lambda: counted_look_up(3, calls))

    read_only_install.mkdir(parents=True)
    stale = (catalog_cache.FORMAT, "0.0.1", *catalog_cache.fingerprint([])[2:])  # another kvplan version
    assert catalog_cache._write(entry, stale, "from another version")
    assert remembered() == 3 and len(calls) == 1  # the stale entry was not used, and is replaced
    assert remembered() == 3 and len(calls) == 1
    entry.write_bytes(b"\x80\x05garbage")
    assert remembered() == 3 and remembered() == 3 and len(calls) == 2


def test_an_unwritable_user_folder_or_no_bytecode_writes_nothing_and_still_plans(
    read_only_install: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "xdg").write_text("a file where the cache folder would go\n")
    calls: list[int] = []
    for _ in range(2):
        assert (
            catalog_cache.remembered("model-x", data_files=list, look_up=lambda: counted_look_up(2, calls))
            == 2
        )
    assert len(calls) == 2
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg2"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert (
        catalog_cache.remembered("model-x", data_files=list, look_up=lambda: counted_look_up(2, calls)) == 2
    )
    assert not (tmp_path / "xdg2").exists()


def test_a_user_folder_of_another_user_is_never_read(
    read_only_install: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    catalog_cache.remembered("model-x", data_files=list, look_up=lambda: counted_look_up(4, calls))
    monkeypatch.setattr(
        catalog_cache.os, "getuid", lambda: read_only_install.stat().st_uid + 1, raising=False
    )
    catalog_cache.remembered("model-x", data_files=list, look_up=lambda: counted_look_up(4, calls))
    assert len(calls) == 2
