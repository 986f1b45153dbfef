"""Issue 14, one regression test per root cause: hostile input ends in exit 0, 2 or 3 with one line.

Every case runs the installed `kvplan` as a subprocess (tests/hostile/promise.py: 20 s and 3 GiB bounds)
on the committed corpus in tests/hostile/ or on large files made in tmp. Each asserts the README promise
(exit 0/2/3, one `kvplan: error:` line for 2/3, no traceback, no hang, strict JSON) and, where the issue
says what the answer must be, that exit code and the flag/file and value the line must name.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import replacing
from tests.hostile import corpus
from tests.hostile.promise import (
    BASE,
    FIRST_K_DENSE,
    FIRST_K_DENSE_CARD,
    HOSTILE_DIR,
    MINDIE,
    WEIGHTS,
    Run,
    assert_promise,
    error_line,
    run_kvplan,
)

H = HOSTILE_DIR
REPO = H.parents[1]
DIGITS_400 = "9" * 400
DEV_ZERO = "/dev/zero"


def check(
    run: Run,
    *,
    codes: set[int] | None = None,
    names: tuple[str | tuple[str, ...], ...] = (),
    names_on: frozenset[int] = frozenset({2, 3}),
) -> None:
    """The promise; then the exit code in `codes`; then, for an exit in `names_on`, every item of `names`
    in the error line (an item that is a tuple: any one of its strings, e.g. the flag or the file name)."""
    assert_promise(run)
    if codes is not None:
        assert run.returncode in codes, f"expected exit {sorted(codes)}\n{run.describe()}"
    if run.returncode in names_on:
        line = error_line(run)
        wanted = [(n,) if isinstance(n, str) else n for n in names]
        missing = [" or ".join(alts) for alts in wanted if not any(a in line for a in alts)]
        assert not missing, f"the error line does not name {missing}\n{run.describe()}"


def case_id(value: object) -> str | None:
    """Readable test ids: the command line, with long values shortened."""
    if not isinstance(value, list):
        return None
    text = " ".join(v if v else "''" for v in value).replace(DIGITS_400, "<400 digits>")
    return re.sub(r"(.)\1{20,}", lambda m: f"{m.group(1)}*{len(m.group(0))}", text)


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return corpus.write_large(tmp_path_factory.mktemp("hostile-large"))


# --- 1. non-finite and out-of-range numbers --------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "codes", "names"),
    [
        ([*BASE, "--memory-gib", "inf"], {2}, ("--memory-gib", "inf")),
        ([*BASE, "--memory-gib", "1e309"], {2}, ("--memory-gib",)),
        ([*BASE, "--memory-gib", "nan"], {2}, ("--memory-gib", "nan")),
        ([*BASE, "--memory-gib", "-0"], {2}, ("--memory-gib",)),
        ([*BASE, "--memory-gib", "1e-320"], {2, 3}, ("--memory-gib",)),
        ([*BASE, "--bandwidth-gbps", "1e-320", "--json"], {0, 2}, ("--bandwidth-gbps",)),
        ([*BASE, "--bandwidth-gbps", "nan", "--json"], {2}, ("--bandwidth-gbps",)),
        ([*BASE, "--memory-fraction", "nan"], {2}, ("--memory-fraction",)),
        ([*BASE, "--mtp-acceptance", "nan", "--mtp", "1"], {2}, ("--mtp-acceptance",)),
        ([*BASE, "--tpot-ms", "inf"], {0, 2}, ("--tpot-ms",)),
        (["--model", "qwen3-8b", "--ctx", DIGITS_400], {2}, ("--ctx",)),
        ([*BASE, "--prompt-tokens", DIGITS_400], {2}, ("--prompt-tokens",)),
        ([*BASE, "--batch", DIGITS_400], {2, 3}, ("--batch",)),
        ([*BASE, "--max-prefill-tokens", DIGITS_400], {2, 3}, ("--max-prefill-tokens",)),
        ([*BASE, "--block-size", DIGITS_400], {2}, ("--block-size",)),
        ([*BASE, "--tp", DIGITS_400], {2}, ("--tp",)),
        (["sweep", "-m", "qwen3-8b", "--ctx", DIGITS_400], {2}, ("--ctx",)),
        (["sweep", "-m", "qwen3-8b", "--memory-gib", "inf"], {2}, ("--memory-gib",)),
        (["serve", "-m", "qwen3-8b", "--input-tokens", DIGITS_400], {2}, ("--input-tokens",)),
        (["serve", "-m", "qwen3-8b", "--memory-gib", "nan", "--json"], {2}, ("--memory-gib",)),
        ([*MINDIE, "--max-output-tokens", DIGITS_400], {2}, ("--max-output-tokens",)),
        ([*MINDIE, "--npu-mem-size", "inf"], {2}, ("--npu-mem-size",)),
        (["vllm", "--model", "qwen3-8b", "--memory-gib", "1e309"], {2}, ("--memory-gib",)),
    ],
    ids=case_id,
)
def test_rc1_non_finite_and_out_of_range_numbers(tmp_path: Path, args, codes, names) -> None:
    check(run_kvplan(args, cwd=tmp_path), codes=codes, names=names)


@pytest.mark.parametrize(
    "command",
    [[*BASE, "--json"], ["mindie", *BASE[:2], *WEIGHTS, "--json"], ["serve", "-m", "qwen3-8b", "--json"]],
)
@pytest.mark.parametrize(
    "profile", ["peak-nan.yaml", "coefficient-nan.yaml", "memory-inf.yaml", "bandwidth-inf.yaml"]
)
def test_rc1_non_finite_profile_is_refused(tmp_path: Path, command: list[str], profile: str) -> None:
    """A profile with a NaN/inf figure is refused naming the file (today: `"decode_step_s": NaN`, a crash)."""
    run = run_kvplan([*command, "--card", str(H / "profiles" / profile)], cwd=tmp_path)
    check(run, codes={2}, names=(("--card", profile),))


# --- 2. unbounded work ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "names"),
    [
        ([*BASE, "--prompt-tokens", "999999999999"], ("--prompt-tokens",)),
        (["sweep", "-m", "qwen3-8b", "--batch", "1-10000000"], ("--batch",)),
        (["sweep", "-m", "qwen3-8b", "--ctx", "1-100000000"], ("--ctx",)),
        (["serve", "-m", "qwen3-8b", "--input-tokens", "999999999999"], ("--input-tokens",)),
        (["serve", "-m", "qwen3-8b", "--output-tokens", "999999999999"], ("--output-tokens",)),
    ],
    ids=case_id,
)
def test_rc2_unbounded_work_is_bounded(tmp_path: Path, args, names) -> None:
    """Answered at once: exit 2 naming the flag, or 3 (does not fit), or a plan (today: hangs or crashes)."""
    check(run_kvplan(args, cwd=tmp_path), codes={0, 2, 3}, names=names, names_on=frozenset({2}))


@pytest.mark.parametrize(
    "command", [["validate"], ["calibrate", "--card", "ascend-950pr", "--out", "fit.yaml", "--from-bench"]]
)
def test_rc2_large_bench_csv_within_bound(tmp_path: Path, large: dict[str, Path], command: list[str]) -> None:
    """A 10^5-row bench CSV is answered (or refused with one line) within the bound (today: ~80 s)."""
    check(run_kvplan([*command, str(large["bench-1e5-rows.csv"])], cwd=tmp_path), codes={0, 2})


# --- 3. unbounded reads ---------------------------------------------------------------------------------

READERS = {  # how each reader of a file is invoked, and the flag its error line may name instead of the file
    "mindie --base": ("--base", lambda p: [*MINDIE, "--base", p]),
    "mindie --from-log": ("--from-log", lambda p: [*MINDIE, "--from-log", p]),
    "validate": ("POINTS_CSV", lambda p: ["validate", p]),
    "calibrate --from-bench": (
        "--from-bench",
        lambda p: ["calibrate", "--card", "ascend-950pr", "--out", "fit.yaml", "--from-bench", p],
    ),
    "models import": ("SOURCE", lambda p: ["models", "import", p]),
    "--model": ("--model", lambda p: ["--model", p]),
    "--card": ("--card", lambda p: [*BASE, "--card", p]),
}


def read_with(reader: str, path: Path | str, cwd: Path) -> tuple[Run, tuple[str, str]]:
    """Run `reader` on `path`; also return what its error line must name: the flag or the file name."""
    flag, build = READERS[reader]
    return run_kvplan(build(str(path)), cwd=cwd), (flag, Path(path).name)


@pytest.mark.skipif(not os.path.exists(DEV_ZERO), reason="no /dev/zero")
@pytest.mark.parametrize("reader", sorted(READERS))
def test_rc3_dev_zero_is_refused_by_size(tmp_path: Path, reader: str) -> None:
    """An endless file is refused with one line before it is read (today: reads until killed)."""
    run, name = read_with(reader, DEV_ZERO, tmp_path)
    check(run, codes={2}, names=(name,))


@pytest.mark.parametrize(("reader", "name"), [("mindie --base", "mindie-base-11MiB.json")])
def test_rc3_oversized_files_are_refused_naming_the_limit(
    tmp_path: Path, large, reader: str, name: str
) -> None:
    run, names = read_with(reader, large[name], tmp_path)
    check(run, codes={2}, names=(names,))
    assert re.search(r"MiB|bytes", error_line(run)), run.describe()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_rc3_fifo_base_does_not_hang(tmp_path: Path) -> None:
    """A FIFO nobody writes to: the reader must not block forever (stat says it is not a regular file)."""
    fifo = tmp_path / "base.json"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    run, names = read_with("mindie --base", fifo, tmp_path)
    check(run, codes={2}, names=(names,))


# --- 4. library errors escape ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "names"),
    [
        ([*MINDIE, "--max-prefill-tokens", "0"], ("--max-prefill-tokens", "0")),
        (["vllm", "--model", "qwen3-8b", "--mtp", "-1"], ("--mtp", "-1")),
        ([*MINDIE, "--mtp", "-1"], ("--mtp", "-1")),
        (["sweep", "-m", "qwen3-8b", "--batch", ""], ("--batch",)),
        (["sweep", "-m", "qwen3-8b", "--ctx", ""], ("--ctx",)),
        (["sweep", "-m", "qwen3-8b", "--dtype", ""], ("--dtype",)),
        (["sweep", "-m", "qwen3-8b", "--batch", ","], ("--batch",)),
        (["sweep", "-m", "qwen3-8b", "--batch", "10-1"], ("--batch",)),
        (["--model", "x" * 300 + ".yaml"], ("--model",)),
        ([*BASE, "--card", "y" * 300 + ".yaml"], ("--card",)),
    ],
    ids=case_id,
)
def test_rc4_option_errors_are_one_line(tmp_path: Path, args, names) -> None:
    check(run_kvplan(args, cwd=tmp_path), codes={2}, names=names)


def test_rc4_long_out_name(tmp_path: Path) -> None:
    """A valid config.json imported to a 300-character file name: one line, not OSError."""
    source = tmp_path / "config.json"
    source.write_text(json.dumps(corpus._hf_base()))
    run = run_kvplan(["models", "import", str(source), "--out", "z" * 300 + ".yaml"], cwd=tmp_path)
    check(run, codes={2}, names=(("--out", "zzzz"),))


@pytest.mark.parametrize(
    ("reader", "rel"),
    [
        ("--model", "modelcards/non-utf8.yaml"),
        ("--card", "profiles/non-utf8.yaml"),
        ("validate", "bench/non-utf8.csv"),
        ("calibrate --from-bench", "bench/non-utf8.csv"),
        ("models import", "hfconfigs/non-utf8.json"),
        ("mindie --base", "mindie-base/non-utf8.json"),
        ("mindie --from-log", "mindie-logs/non-utf8.log"),
        ("--model", "modelcards/deep-nesting.yaml"),
        ("models import", "hfconfigs/deep-nesting.json"),
        ("mindie --base", "mindie-base/deep-nesting.json"),
        ("models import", "hfconfigs/heads-zero.json"),
        ("models import", "hfconfigs/kv-heads-zero.json"),
        ("models import", "hfconfigs/layers-1e9.json"),
        ("models import", "hfconfigs/text-config-not-object.json"),
        ("models import", "hfconfigs/vocab-400-digits.json"),
        ("mindie --base", "mindie-base/plugin-params-number.json"),
        ("mindie --base", "mindie-base/plugin-params-object.json"),
        ("mindie --base", "mindie-base/plugin-params-bad-json.json"),
        ("mindie --base", "mindie-base/plugin-params-list-string.json"),
        ("mindie --base", "mindie-base/model-config-not-list.json"),
        ("mindie --base", "mindie-base/model-config-empty-list.json"),
        ("mindie --base", "mindie-base/backend-null.json"),
        ("mindie --base", "mindie-base/not-an-object.json"),
        ("--model", "modelcards/layers-1e9.yaml"),
        ("--model", "modelcards/vocab-400-digits.yaml"),
        ("--model", "modelcards/alias-bomb.yaml"),
        ("--card", "profiles/memory-400-digits.yaml"),
        ("--card", "profiles/memory-denormal.yaml"),
        ("mindie --from-log", "mindie-logs/block-num-400-digits.log"),
        ("mindie --from-log", "mindie-logs/allocated-huge.log"),
    ],
)
def test_rc4_malformed_files_are_refused_naming_the_file(tmp_path: Path, reader: str, rel: str) -> None:
    """Malformed files: exit 2 naming the file (or a clean answer), never a library exception."""
    run, names = read_with(reader, H / rel, tmp_path)
    check(run, names=(names,))


@pytest.mark.parametrize("reader", ["models import", "mindie --base"])
def test_rc4_deep_json_1e5_is_refused(tmp_path: Path, large, reader: str) -> None:
    name = "hf-deep-1e5.json" if reader == "models import" else "mindie-base-deep-1e5.json"
    run, names = read_with(reader, large[name], tmp_path)
    check(run, codes={2}, names=(names,))


# --- 5. physically impossible data ----------------------------------------------------------------------


def test_rc5_first_k_dense_beyond_layers_card_refused(tmp_path: Path) -> None:
    for command in ([], ["mindie", "--out", "config.json", *WEIGHTS]):
        run = run_kvplan([*command, *FIRST_K_DENSE], cwd=tmp_path)
        check(run, codes={2}, names=(FIRST_K_DENSE_CARD.name, "first_k_dense_replace"))
    assert not (tmp_path / "config.json").exists()


def test_rc5_first_k_dense_beyond_layers_import_refused(tmp_path: Path) -> None:
    source = H / "hfconfigs" / "deepseek-first-k-dense-1000.json"
    run = run_kvplan(["models", "import", str(source)], cwd=tmp_path)
    check(run, codes={2}, names=(source.name, "first_k_dense_replace"))


@pytest.mark.parametrize(
    "rel", ["modelcards/deepseek-kv-lora-zero.yaml", "modelcards/deepseek-experts-per-tok-over-experts.yaml"]
)
def test_rc5_impossible_moe_geometry_refused(tmp_path: Path, rel: str) -> None:
    args = ["--model", str(H / rel), "--card", "ascend-910c", "--tp", "16", "--dtype", "int8"]
    check(run_kvplan(args, cwd=tmp_path), codes={2}, names=(Path(rel).name,))


@pytest.mark.parametrize(
    "csv_name", ["nan-times.csv", "inf-times.csv", "zero-times.csv", "denormal-times.csv"]
)
def test_rc5_non_finite_bench_times_refused(tmp_path: Path, csv_name: str) -> None:
    """validate refuses NaN/inf/zero times naming the file (today: `MAPE nan %`, exit 0)."""
    run = run_kvplan(["validate", str(H / "bench" / csv_name), "--card", "ascend-950pr"], cwd=tmp_path)
    check(run, codes={2}, names=(csv_name,))
    assert "nan" not in run.stdout.lower(), run.describe()


@pytest.mark.parametrize(
    "csv_name",
    [
        "nan-times.csv",
        "inf-times.csv",
        "denormal-times.csv",
        "one-point.csv",
        "identical-points.csv",
        "contradictory.csv",
    ],
)
def test_rc5_calibrate_never_writes_non_finite(tmp_path: Path, csv_name: str) -> None:
    """calibrate --from-bench writes no .nan/.inf into a profile (today: writes `.nan`, exit 0)."""
    args = [
        "calibrate",
        "--card",
        "ascend-950pr",
        "--from-bench",
        str(H / "bench" / csv_name),
        "--out",
        "fit.yaml",
    ]
    run = run_kvplan(args, cwd=tmp_path)
    check(run, names=(csv_name,))
    out = tmp_path / "fit.yaml"
    if out.exists():
        text = out.read_text().lower()
        assert ".nan" not in text and ".inf" not in text, f"non-finite figure written\n{run.describe()}"


# --- 6. silent substitution -----------------------------------------------------------------------------


def test_rc6_empty_weights_path_never_writes_the_pinned_test_path(tmp_path: Path) -> None:
    run = run_kvplan(replacing(MINDIE, ["--weights-path", "", "--out", "config.json"]), cwd=tmp_path)
    check(run, names=("--weights-path",))
    written = (tmp_path / "config.json").read_text() if (tmp_path / "config.json").exists() else ""
    assert "/data/atb_testdata" not in written + run.stdout, f"pinned test path substituted\n{run.describe()}"


def test_rc6_empty_token_flags_are_errors(tmp_path: Path) -> None:
    for flag in ("--prompt-tokens", "--ctx"):
        check(run_kvplan(replacing(BASE, [flag, ""]), cwd=tmp_path), codes={2}, names=(flag,))


def test_rc6_concurrency_beyond_what_can_be_simulated_is_refused(tmp_path: Path) -> None:
    # issue 23: concurrency beyond what memory holds at full length runs (the engine queues or preempts);
    # only more users than the simulator takes is refused, as a usage error
    run = run_kvplan(["serve", "-m", "qwen3-8b", "--concurrency", "100001"], cwd=tmp_path)
    check(run, codes={2}, names=("--concurrency", "100001"))


def test_rc6_zero_tpot_is_a_usage_error(tmp_path: Path) -> None:
    run = run_kvplan(["serve", "-m", "qwen3-8b", "--tpot-ms", "0"], cwd=tmp_path)
    check(run, codes={2}, names=("--tpot-ms", "0"))


# --- 7. usage boxes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "names"),
    [
        ([*BASE, "--tp", "abc"], ("--tp", "abc")),
        ([*BASE, "--batch", "1.5"], ("--batch", "1.5")),
        ([*BASE, "--memory-gib", "lots"], ("--memory-gib", "lots")),
        ([*BASE, "--bogus-flag"], ("--bogus-flag",)),
        ([*BASE, "--tp"], ("--tp",)),
        (["serve", "-m", "qwen3-8b", "--concurrency", "0"], ("--concurrency", "0")),
        (["calibrate", "--card", "ascend-950pr", "--budget-s", "0"], ("--budget-s",)),
        (["sweep"], ("--model",)),
        (["validate"], ("POINTS_CSV",)),
        (["validate", "no-such.csv"], ("no-such.csv",)),
        (["models", "import", "no-such-dir"], ("no-such-dir",)),
        (["no-such-command"], ("no-such-command",)),
        (["--model", "./no-such-card.yaml"], ("no-such-card.yaml",)),
    ],
    ids=case_id,
)
def test_rc7_click_errors_are_one_line(tmp_path: Path, args, names) -> None:
    run = run_kvplan(args, cwd=tmp_path)
    check(run, codes={2}, names=names)
    assert "╭" not in run.stderr and "Usage:" not in run.stderr, run.describe()


def test_rc7_missing_model_path_says_file_missing(tmp_path: Path) -> None:
    run = run_kvplan(["--model", "./no-such-card.yaml"], cwd=tmp_path)
    check(run, codes={2}, names=("no-such-card.yaml",))
    assert "unknown model card" not in run.stderr and re.search(
        r"not found|no such file|missing", run.stderr, re.I
    )


# --- dashboard (no browser) -----------------------------------------------------------------------------


def _streamlit_config() -> dict:
    tomllib = pytest.importorskip("tomllib")
    path = REPO / ".streamlit" / "config.toml"
    assert path.is_file(), ".streamlit/config.toml is missing (issue 14: bind to localhost by default)"
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_dashboard_binds_localhost() -> None:
    assert _streamlit_config().get("server", {}).get("address") in ("localhost", "127.0.0.1")


def test_dashboard_hides_error_details() -> None:
    assert _streamlit_config().get("client", {}).get("showErrorDetails") in (False, "none")


def test_dashboard_upload_limit_is_explicit() -> None:
    limit = _streamlit_config().get("server", {}).get("maxUploadSize")
    assert isinstance(limit, int) and 0 < limit <= 50, f"server.maxUploadSize (MB) = {limit!r}"


def test_dashboard_config_is_what_streamlit_reads() -> None:
    """`streamlit config show` from the repository root reports the shipped address and error setting."""
    _streamlit_config()
    exe = Path(sys.executable).parent / "streamlit"
    if not exe.exists():
        pytest.skip("streamlit not installed next to this interpreter")
    shown = subprocess.run(
        [str(exe), "config", "show"], cwd=REPO, capture_output=True, text=True, timeout=60
    ).stdout
    assert re.search(r'^address = "(localhost|127\.0\.0\.1)"', shown, re.M), shown[-2000:]
    assert re.search(r'^showErrorDetails = (false|"none")', shown, re.M), shown[-2000:]


# --- new surface (2026-12-01 afternoon): simulate, traces, layouts, serve -------------------------------

SIM_LOAD = ["simulate", "-m", "qwen3-8b"]  # a case that sets its own --requests
SIM = [*SIM_LOAD, "--requests", "50"]


@pytest.mark.parametrize(
    ("rel", "codes", "names"),
    [
        ("traces/trace-empty.csv", {2}, ("trace-empty.csv",)),
        ("traces/trace-header-only.csv", {2}, ("trace-header-only.csv",)),
        ("traces/trace-bad-header.csv", {2}, ("trace-bad-header.csv", "header")),
        ("traces/trace-bom.csv", {0, 2}, ("trace-bom.csv",)),
        ("traces/trace-negative-time.csv", {2}, ("trace-negative-time.csv", "-1")),
        ("traces/trace-nan-time.csv", {2}, ("trace-nan-time.csv", "nan")),
        ("traces/trace-inf-tokens.csv", {2}, ("trace-inf-tokens.csv", "inf")),
        ("traces/trace-zero-tokens.csv", {2}, ("trace-zero-tokens.csv",)),
        ("traces/trace-fraction-tokens.csv", {2}, ("trace-fraction-tokens.csv", "10.5")),
        ("traces/trace-400-digits.csv", {2}, ("trace-400-digits.csv",)),
        # cause: the longest request fed --max-prefill-tokens' range check, which named a flag not given;
        # then --input-tokens + --output-tokens, also not given: now the trace's line
        ("traces/trace-tokens-over-limit.csv", {2}, ("trace-tokens-over-limit.csv:2", "1073741824")),
        ("traces/trace-time-1e300.csv", {0, 2, 3}, ("trace-time-1e300.csv",)),
        ("traces/trace-unsorted.csv", {0}, ()),
        ("traces/trace-short-row.csv", {2}, ("trace-short-row.csv",)),
        ("traces/trace-nul-bytes.csv", {2}, ("trace-nul-bytes.csv",)),
        ("traces/trace-non-utf8.csv", {2}, ("trace-non-utf8.csv", "UTF-8")),
        ("traces/trace-unclosed-quote.csv", {2}, ("trace-unclosed-quote.csv",)),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_sim_malformed_traces(tmp_path: Path, rel: str, codes: set[int], names) -> None:
    run = run_kvplan(["simulate", "-m", "qwen3-8b", "--trace", str(H / rel), "--json"], cwd=tmp_path)
    check(run, codes=codes, names=names)


@pytest.mark.parametrize(
    ("rel", "codes"),
    [
        ("traces/lengths-superscript-digit.txt", {2}),  # cause: str.isdigit() took '²', int() raised
        ("traces/lengths-arabic-digits.txt", {2}),
        ("traces/lengths-zero.txt", {2}),
        ("traces/lengths-400-digits.txt", {2}),
        ("traces/lengths-empty.txt", {2}),
        ("traces/lengths-non-utf8.txt", {2}),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_sim_malformed_empirical_lengths(tmp_path: Path, rel: str, codes: set[int]) -> None:
    run = run_kvplan([*SIM, "--rate", "2", "--input-tokens", f"empirical:{H / rel}"], cwd=tmp_path)
    check(run, codes=codes, names=("--input-tokens", Path(rel).name))


def test_sim_trace_over_request_limit_is_refused_quickly(tmp_path: Path, large: dict[str, Path]) -> None:
    """Cause: every row of a 10^6-row trace was parsed before the row count was checked (15 s)."""
    run = run_kvplan(
        ["simulate", "-m", "qwen3-8b", "--trace", str(large["trace-300k-rows.csv"])], cwd=tmp_path
    )
    check(run, codes={2}, names=("--trace", "200000"))


@pytest.mark.parametrize(
    ("args", "codes", "names"),
    [
        # cause: no bound on simulated work; 2.6e10 tokens ran for minutes
        (
            [*SIM_LOAD, "--concurrency", "100000", "--requests", "200000", "--output-tokens", "128k"],
            {2},
            ("tokens",),
        ),
        (
            [*SIM_LOAD, "--rate", "2", "--requests", "200000", "--input-tokens", "128k", "--max-batch", "1"],
            {2},
            (),
        ),
        # cause: one prefill pass per token (vLLM budget 1): 1.2e6 passes, minutes; now refused before running
        (
            [
                *SIM_LOAD,
                "--rate",
                "2",
                "--requests",
                "150",
                "--engine",
                "vllm",
                "--max-batched-tokens",
                "1",
                "--max-batch",
                "1",
                "--input-tokens",
                "8k",
            ],
            {2},
            ("engine steps",),
        ),
        ([*SIM, "--rate", "1e300"], {2}, ("--rate",)),
        ([*SIM, "--rate", "nan"], {2}, ("--rate", "nan")),
        ([*SIM, "--rate", "0"], {2}, ("--rate",)),
        ([*SIM_LOAD, "--requests", "999999999999", "--rate", "2"], {2}, ("--requests", "999999999999")),
        ([*SIM, "--rate", "2", "--pd", "0:0"], {2}, ("--pd", "0:0")),
        ([*SIM, "--rate", "2", "--pd", "1000:1000"], {2}, ("--pd", "1000:1000")),
        ([*SIM, "--rate", "2", "--input-tokens", "1024m", "--json"], {2}, ("--input-tokens",)),
        (
            ["serve", "-m", "qwen3-8b", "--input-tokens", "1024m", "--output-tokens", "1024m"],
            {2},
            ("--input-tokens", "--output-tokens"),
        ),
        (
            replacing(
                BASE, ["--ep", "1000", "--model", "deepseek-v3", "--card", "ascend-910c", "--tp", "16"]
            ),
            {2},
            ("--ep",),
        ),
        (
            ["vllm", "--model", "deepseek-v3", "--card", "ascend-910c", "--tp", "16", "--pp", "1000"],
            {2},
            ("--pp",),
        ),
        ([*BASE, "--nodes", "1000000000"], {2}, ("--nodes",)),
        ([*BASE, "--dp", "0"], {2}, ("--dp",)),
    ],
    ids=case_id,
)
def test_sim_and_layout_bounds(tmp_path: Path, args, codes, names) -> None:
    check(run_kvplan(args, cwd=tmp_path), codes=codes, names=names)


def test_sim_outputs_checked_before_running(tmp_path: Path) -> None:
    """Cause: --out was written, then --timeline-out (same file, or an existing one) failed: half the
    outputs on disk with exit 2; with --force the timeline replaced the records."""
    run = run_kvplan(
        [*SIM, "--rate", "2", "--out", "same.csv", "--timeline-out", "./same.csv", "--force"], cwd=tmp_path
    )
    check(run, codes={2}, names=("--timeline-out", "--out"))
    (tmp_path / "old.csv").write_text("keep\n")
    run = run_kvplan([*SIM, "--rate", "2", "--out", "new.csv", "--timeline-out", "old.csv"], cwd=tmp_path)
    check(run, codes={2}, names=("old.csv",))
    assert not (tmp_path / "same.csv").exists() and not (tmp_path / "new.csv").exists()
    assert (tmp_path / "old.csv").read_text() == "keep\n"


@pytest.mark.parametrize(
    ("name", "codes", "names"),
    [
        # cause: Deployment's pydantic bounds (tp <= 64, mtp <= 8) escaped as a ValidationError traceback
        ("serving-tp-1e8.csv", {2}, ("serving-tp-1e8.csv:2", "tp", "100000000")),
        ("serving-mtp-99.csv", {2}, ("serving-mtp-99.csv:2", "mtp", "99")),
        ("serving-concurrency-1e11.csv", {0, 2}, ("serving-concurrency-1e11.csv",)),
        ("serving-dp-1e9.csv", {0, 2}, ("serving-dp-1e9.csv",)),
        ("serving-tps-nan.csv", {2}, ("serving-tps-nan.csv:2",)),
        ("serving-tps-1e-320.csv", {2}, ("serving-tps-1e-320.csv:2",)),
        ("serving-concurrency-zero.csv", {2}, ("serving-concurrency-zero.csv:2",)),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
@pytest.mark.parametrize("command", ["validate", "calibrate"])
def test_serving_bench_rows(tmp_path: Path, command: str, name: str, codes: set[int], names) -> None:
    path = str(H / "bench" / name)
    args = (
        ["validate", path, "--card", "ascend-950pr"]
        if command == "validate"
        # --accept-poor-fit: a hostile file fits badly (else exit 4); the written profile is checked
        else [
            "calibrate",
            "--card",
            "ascend-950pr",
            "--from-bench",
            path,
            "--out",
            "fit.yaml",
            "--accept-poor-fit",
        ]
    )
    run = run_kvplan(args, cwd=tmp_path)
    check(run, codes=codes, names=names)
    if command == "calibrate" and run.returncode == 0:
        assert not re.search(r"\.nan|\.inf", (tmp_path / "fit.yaml").read_text(), re.I)


@pytest.mark.parametrize(
    "name",
    [
        "result-completed-denormal.json",  # cause: total / 5e-324 requests overflowed round(): traceback
        "result-completed-zero.json",
        "result-duration-zero.json",  # cause: 0 s / 0 ms were written into a row validate cannot re-read
        "result-ttft-zero.json",
        "result-tpot-denormal.json",
        "result-throughput-denormal.json",
        "result-input-tokens-huge.json",
        "result-throughput-nan.json",
        "result-not-object.json",
    ],
)
def test_bench_import_malformed_results(tmp_path: Path, name: str) -> None:
    args = ["bench", "import", str(H / "bench" / name), "-m", "qwen3-8b", "--card", "ascend-910b3"]
    run = run_kvplan([*args, "--out", "rows.csv"], cwd=tmp_path)
    check(run, codes={2}, names=(name,))
    assert not (tmp_path / "rows.csv").exists()


def test_layout_top_out_of_range_names_top(tmp_path: Path) -> None:
    """Cause: any out-of-range value with --top >= 1 was blamed on --budget-devices (a value in range)."""
    run = run_kvplan(
        ["layout", "-m", "qwen3-8b", "--budget-devices", "8", "--top", "999999999999"], cwd=tmp_path
    )
    check(run, codes={2}, names=("--top", "999999999999"))
