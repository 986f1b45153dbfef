"""Issue 14: hypothesis fuzz of every `kvplan` command and flag, and of generated malformed data files.

Commands and flags are read from `kvplan --help` / `kvplan CMD --help` at test time, so a new flag is fuzzed
without editing this file; BASES below gives each command a valid starting invocation. Every run is a
subprocess (tests/hostile/promise.py) and must keep the README promise: exit 0, 2 or 3; one
`kvplan: error:` line for 2/3; no traceback; no hang (20 s); strict JSON for --json.

Cost: every example spawns processes (~0.4-1 s each), so the default is small and derandomized (the same
examples every run, so CI is stable): KVPLAN_FUZZ_EXAMPLES (default 2) examples per target, each running
RUNS_PER_EXAMPLE argument vectors two at a time; ~60 s on 2 cores. The long attack explores new inputs:
`KVPLAN_FUZZ_RANDOM=1 KVPLAN_FUZZ_EXAMPLES=40 pytest tests/test_fuzz_cli.py` (~15 min). KVPLAN_FUZZ_SHRINK=1
turns hypothesis' shrinking on (off by default: shrinking a hang costs 20 s a step).
"""

from __future__ import annotations

import copy
import json
import os
import re
import stat
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.hostile import corpus
from tests.hostile.promise import Run, broken_promises, run_kvplan

EXAMPLES = int(os.environ.get("KVPLAN_FUZZ_EXAMPLES", "2"))
RANDOM = bool(os.environ.get("KVPLAN_FUZZ_RANDOM"))  # default: the same examples every run (stable CI)
RUNS_PER_EXAMPLE = 2
PHASES = [Phase.explicit, Phase.generate] + ([Phase.shrink] if os.environ.get("KVPLAN_FUZZ_SHRINK") else [])
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=not RANDOM,
    deadline=None,
    database=None,
    phases=PHASES,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
GOOD_CSV = "good.csv"  # written into every example's directory
GOOD_HF = "good-config.json"
GOOD_RESULT = "good-vllm-bench.json"  # a `vllm bench serve --save-result` file (tests/fixtures/bench_results)

# A valid invocation of every command; fuzzed flags are appended after it (the last value wins).
BASES: dict[str, list[str]] = {
    "": ["--model", "qwen3-8b"],
    "cards": ["cards"],
    "sweep": ["sweep", "-m", "qwen3-8b", "--batch", "1,8", "--ctx", "1k"],
    "serve": ["serve", "-m", "qwen3-8b"],
    "simulate": ["simulate", "-m", "qwen3-8b", "--rate", "2", "--requests", "50"],
    "calibrate": ["calibrate", "--card", "ascend-950pr", "--from-bench", GOOD_CSV, "--out", "fit.yaml"],
    "validate": ["validate", GOOD_CSV],
    "mindie": [
        "mindie",
        "--model",
        "qwen3-8b",
        "--weights-path",
        "/data/models/qwen3-8b",
        "--out",
        "config.json",
    ],
    "vllm": ["vllm", "--model", "qwen3-8b"],
    "sglang": ["sglang", "--model", "qwen3-8b"],
    "layout": ["layout", "--model", "qwen3-8b", "--budget-devices", "2"],
    "models": ["models"],
    "models import": ["models", "import", GOOD_HF],
    "bench": ["bench"],
    "bench import": ["bench", "import", GOOD_RESULT, "-m", "qwen3-8b", "--card", "ascend-910b3"],
}
# Commands that start a long-running server (`kvplan dashboard`): not fuzzed here, where every run must end
# in 20 s; its flags are checked in tests/test_dashboard_launch.py and the page in tests/test_browser.py.
SERVERS = {"dashboard"}
# Flags whose value is a file kvplan writes: only names inside the example's own directory, never /dev/*.
OUTPUT_FLAGS = {"--out", "-o", "--raw", "--timeline-out"}
# calibrate without --from-bench runs minutes of microbenchmarks: that flag only ever gets a file.
NEVER_EMPTY = {("calibrate", "--from-bench")}
TOKEN_FLAG = re.compile(r"tokens|ctx|batch|concurrency|block-size|mtp$|tp$")


# --- discovery from --help ------------------------------------------------------------------------------

# "--ctx,--max-model-len  <str>": the first spelling of an option with aliases
OPTION_LINE = re.compile(
    r"^│\s+(?:\*\s+)?(--[a-z0-9][a-z0-9-]*)(?:,--[a-z0-9-]+)*(?:\s+-[A-Za-z])?\s+<([^>]+)>"
)
ARGUMENT_LINE = re.compile(r"^│\s+(?:\*\s+)?([a-z_]+)\s+<([^>]+)>")
COMMAND_LINE = re.compile(r"^│\s+([a-z][a-z-]*)\s{2,}\S")


def parse_help(text: str) -> tuple[dict[str, str], list[str], list[str]]:
    """(option -> type, positional argument types, subcommands) from a rich `--help` screen."""
    options: dict[str, str] = {}
    arguments: list[str] = []
    commands: list[str] = []
    panel = ""
    for line in text.splitlines():
        if line.startswith("╭─"):
            panel = line.strip("╭─ ").split(" ")[0]
            continue
        if panel == "Options" and (m := OPTION_LINE.match(line)):
            options[m.group(1)] = m.group(2)
        elif panel == "Arguments" and (m := ARGUMENT_LINE.match(line)):
            arguments.append(m.group(2))
        elif panel == "Commands" and (m := COMMAND_LINE.match(line)):
            commands.append(m.group(1))
    options.pop("--help", None)
    return options, arguments, commands


@pytest.fixture(scope="session")
def cli_surface(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, str], list[str]]]:
    """Every command path -> (its options with their types, its positional argument types)."""
    cwd = tmp_path_factory.mktemp("help")
    surface: dict[str, tuple[dict[str, str], list[str]]] = {}
    todo = [""]
    while todo:
        with ThreadPoolExecutor(2) as pool:
            runs = list(pool.map(lambda c: run_kvplan([*c.split(), "--help"], cwd=cwd), todo))
        todo = []
        for run in runs:
            name = " ".join(run.args[:-1])
            assert run.returncode == 0, run.describe()
            options, arguments, commands = parse_help(os.linesep.join(run.stdout.splitlines()))
            surface[name] = (options, arguments)
            todo += [f"{name} {c}".strip() for c in commands]
    return surface


def test_help_discovery_covers_every_command(cli_surface) -> None:
    """Every command found in --help has a base invocation here, and the root's options were parsed."""
    assert "--model" in cli_surface[""][0] and "--ctx" in cli_surface[""][0], cli_surface[""]
    missing = sorted(set(cli_surface) - set(BASES) - set(SERVERS))
    assert not missing, f"add a valid base invocation to BASES for: {missing}"


# --- hostile values -------------------------------------------------------------------------------------

NUMBER_TEXT = [
    "0",
    "-0",
    "-1",
    "1e-320",
    "5e-324",
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "1e309",
    "9" * 400,
    "999999999999",
    "-999999999999",
    "1.5",
    "32q",
    "",
    " ",
    "0x10",
    "1_000",
    "١٢",
    "\uff11\uff12",
    "1e3",
    "2**64",
    "1k",
    "1.5k",
    "128K",
    "-4k",
    "1e999k",
    "18446744073709551617",
    "\u00a0",
    "1,2",
    "1-0",
    "1-10000000",
    "9" * 5000,  # past Python's 4 300-digit int() limit (issue 26 T1)
    "1-4096",  # a sweep axis at its cap: with a long --ctx list the grid is capped by work (T10)
]
TEXT = [
    "",
    " ",
    "x" * 300,
    "../../../etc/passwd",
    "qwen3-8b\x00",
    "模型",
    "é",
    "\u202e",
    "-",
    "--",
    "a,b,,",
    "bf16,",
    ",",
    "qwen3-8b,qwen3-8b",
    "ascend-950pr",
    "fp8",
    "int8",
    "w4a16",
    "mindie",
    "vllm",
    "json",
    "csv",
    "table",
    "npu:99999",
    "cuda:-1",
    "auto",
    "-1",
    "0,0,0",
    "0,1,2,3,4,5,6,7,8",
    "2.x",
    "1.0.RC3",
    ",".join(str(i) for i in range(1, 4097)),  # a 4 096-point --ctx (or --batch) list: the sweep grid cap
    "sglang",
    "transformers",
    # --speculative-config JSON (2026-12-05 surface): drafters an engine lacks, counts out of range, not
    # objects
    '{"method": "dflash", "num_speculative_tokens": 3}',
    '{"method": "eagle3", "num_speculative_tokens": 3, "model": "x"}',
    '{"method": "mtp", "num_speculative_tokens": 1e400}',
    '{"method": "eagle3", "num_speculative_tokens": -1}',
    '{"method": "ngram", "num_speculative_tokens": true}',
    '{"method": ["mtp"], "model": {"a": 1}}',
    '{"method": "mtp", "num_speculative_tokens": NaN}',
    "[]",
    "null",
    "{",
    "[" * 5000,
]
# Special files made in every example's directory (prepare()): never the real /dev/null (issue 26 S1).
FIFO, DIR_LINK, FIFO_LINK = "fifo", "dir-link", "fifo-link"
LONG_NAME = "n" * 300  # past NAME_MAX (T11)
LONG_PATH = "/".join(["p" * 200] * 25)  # past PATH_MAX


def corpus_paths() -> list[str]:
    return [str(p) for kind in corpus.KINDS for p in corpus.corpus_files(kind)]


def hostile_number() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(NUMBER_TEXT),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(max_size=8),
    )


def hostile_input_path() -> st.SearchStrategy[str]:
    special = [
        "/dev/zero",
        "/dev/null",
        "no-such-file",
        ".",
        "/",
        "",
        "x" * 300,
        GOOD_CSV,
        GOOD_HF,
        GOOD_RESULT,
        FIFO,  # a FIFO as an input must never block (H1)
        FIFO_LINK,
        DIR_LINK,
        LONG_NAME,
        LONG_PATH,
    ]
    return st.sampled_from(special + corpus_paths())


def hostile_output_path() -> st.SearchStrategy[str]:
    # the special files: writers onto them (S1) are refused, --force or not
    return st.sampled_from(
        [
            "out.yaml",
            "out.json",
            "no-dir/out.yaml",
            ".",
            "",
            "z" * 300 + ".yaml",
            GOOD_CSV,
            FIFO,
            FIFO_LINK,
            DIR_LINK,
        ]
    )


def value_strategy(command: str, flag: str, kind: str) -> st.SearchStrategy[str]:
    if flag in OUTPUT_FLAGS:
        return hostile_output_path()
    if kind == "path":
        paths = hostile_input_path()
        return paths.filter(bool) if (command, flag) in NEVER_EMPTY else paths
    if kind.startswith(("int", "float")) or TOKEN_FLAG.search(flag):
        return hostile_number()
    return st.one_of(st.sampled_from(TEXT + corpus_paths()), st.text(max_size=12), hostile_number())


@st.composite
def invocation(
    draw: st.DrawFn, command: str, surface: dict[str, tuple[dict[str, str], list[str]]]
) -> list[str]:
    options, arguments = surface[command]
    args = list(BASES[command])
    if arguments and draw(st.booleans()):  # replace the positional argument
        args[len(command.split())] = draw(hostile_input_path())
    fuzzable = sorted(f for f in options if (command, f) not in {("calibrate", "--device")})
    for flag in (
        draw(st.lists(st.sampled_from(fuzzable), min_size=1, max_size=3, unique=True)) if fuzzable else []
    ):
        if options[flag] == "bool":
            args.append(flag)
        else:
            args += [flag, draw(value_strategy(command, flag, options[flag]))]
    return args


# --- running a batch ------------------------------------------------------------------------------------


def prepare(directory: Path) -> None:
    """The good files a base invocation refers to, and the special files, in the example's own directory."""
    os.mkfifo(directory / FIFO)
    (directory / "a-dir").mkdir()
    (directory / DIR_LINK).symlink_to("a-dir")
    (directory / FIFO_LINK).symlink_to(FIFO)
    rows = "".join(corpus.bench_row(f"{0.010 + 0.002 * i:.4f}", batch=str(2**i)) for i in range(5))
    (directory / GOOD_CSV).write_text(corpus.BENCH_HEADER + rows)
    (directory / GOOD_HF).write_text(json.dumps(corpus._hf_base()))
    fixture = Path(__file__).parent / "fixtures" / "bench_results" / "vllm_bench_serve.json"
    (directory / GOOD_RESULT).write_text(fixture.read_text())


def special_files_intact(directory: Path) -> list[str]:
    """What a run did to the special files of its directory (nothing, if the writers keep their rule)."""
    problems = []
    if not stat.S_ISFIFO(os.lstat(directory / FIFO).st_mode):
        problems.append("the FIFO was replaced")
    if not (directory / DIR_LINK).is_symlink() or not (directory / "a-dir").is_dir():
        problems.append("the directory link was replaced")
    if not (directory / FIFO_LINK).is_symlink():
        problems.append("the FIFO link was replaced")
    return problems


def run_batch(batch: list[list[str]]) -> list[tuple[Run, list[str]]]:
    with tempfile.TemporaryDirectory(prefix="kvplan-fuzz-") as tmp:
        dirs = [Path(tmp) / str(i) for i in range(len(batch))]
        for directory in dirs:
            directory.mkdir()
            prepare(directory)
        with ThreadPoolExecutor(2) as pool:
            runs = list(
                pool.map(lambda pair: run_kvplan(pair[0], cwd=pair[1]), zip(batch, dirs, strict=True))
            )
        return [(run, special_files_intact(d)) for run, d in zip(runs, dirs, strict=True)]


def assert_batch(batch: list[list[str]]) -> None:
    failures = [
        (problems, run) for run, damage in run_batch(batch) if (problems := broken_promises(run) + damage)
    ]
    assert not failures, "\n".join("; ".join(p) + "\n" + r.describe() for p, r in failures)


@pytest.mark.parametrize("command", sorted(BASES))
def test_fuzz_command_flags(cli_surface, command: str) -> None:
    if command not in cli_surface:
        pytest.fail(f"command {command!r} is in BASES but not in --help")

    @FUZZ
    @given(st.lists(invocation(command, cli_surface), min_size=RUNS_PER_EXAMPLE, max_size=RUNS_PER_EXAMPLE))
    def fuzz(batch: list[list[str]]) -> None:
        assert_batch(batch)

    fuzz()


# --- generated malformed data files ---------------------------------------------------------------------

LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 10**9, 10**18, 2**64, 10**400, -(10**400)]),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.sampled_from(["", "nan", "inf", "1e309", "9" * 400, "é", "\x00"]),
)
VALUE = st.recursive(
    LEAF,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=6), kids, max_size=3)
    ),
    max_leaves=6,
)


def _yaml_dump(data: Any) -> bytes:
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    return text.encode("utf-8", "surrogatepass")


def _json_dump(data: Any) -> bytes:
    return json.dumps(data, indent=1).encode("utf-8", "surrogatepass")  # NaN/Infinity literals on purpose


@st.composite
def mutated_bytes(draw: st.DrawFn, base: dict[str, Any], dump: Any) -> bytes:
    """`base` with 1-3 keys (top level or one down) set to hostile values or deleted; maybe byte-damaged."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        target = data
        nested = [k for k, v in target.items() if isinstance(v, dict) and v]
        if nested and draw(st.booleans()):
            target = target[draw(st.sampled_from(sorted(nested)))]
        if not target:
            continue
        key = draw(st.sampled_from(sorted(target)))
        if draw(st.integers(0, 4)) == 0:
            del target[key]
        else:
            target[key] = draw(VALUE)
    raw = dump(data)
    damage = draw(st.sampled_from(["none", "none", "truncate", "bad-bytes", "bom", "huge-int", "deep"]))
    if damage == "truncate":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif damage == "bad-bytes":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + b"\xff\xfe\xc3(" + raw[at:]
    elif damage == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif damage == "huge-int":  # the first number becomes 5 000 digits (T1; json.dumps cannot write it)
        raw = re.sub(rb"\d+", b"9" * 5000, raw, count=1)
    elif damage == "deep":  # one more key holding 5 000 nested lists (T2)
        nested = b"[" * 5000 + b"]" * 5000
        raw = (
            b'{"deep": ' + nested + b", " + raw[1:]
            if raw.startswith(b"{")
            else b"deep: " + nested + b"\n" + raw
        )
    return raw


def _card_base() -> dict[str, Any]:
    return yaml.safe_load((corpus.REPO / "modelcards" / "qwen3-8b.yaml").read_text())


def _profile_base() -> dict[str, Any]:
    return yaml.safe_load((corpus.REPO / "hwprofiles" / "ascend-950pr.yaml").read_text())


LONG_FIELD = "x" * 200_000  # past the csv module's 131 072-character field limit (T8)


@st.composite
def bench_csv(draw: st.DrawFn) -> bytes:
    cells = st.one_of(
        st.sampled_from([*NUMBER_TEXT, LONG_FIELD]),
        st.text(max_size=6).filter(lambda s: "," not in s and "\n" not in s),
    )
    rows = []
    for i in range(draw(st.integers(0, 6))):
        fields = corpus.bench_row(f"{0.01 + 0.001 * i:.4f}", batch=str(2**i)).strip().split(",")
        for _ in range(draw(st.integers(0, 2))):
            fields[draw(st.integers(0, len(fields) - 1))] = draw(cells)
        rows.append(",".join(fields) + "\n")
    header = corpus.BENCH_HEADER if draw(st.integers(0, 5)) else "model,card,dtype\n"
    return (header + "".join(rows)).encode("utf-8", "surrogatepass")


@st.composite
def mindie_log(draw: st.DrawFn) -> bytes:
    templates = [
        "Model loading took {} GiB memory.",
        "Allocated {} (GiB) NPU memory for KVcache. Model role: standard",
        "CpuBlockNum:0; NpuBlockNum: {}",
        "Requested memory: {} (util), {} GiB",
        "Warmup failed. ... Required block number: {}. Left block number: {}.",
        "Total npu memory: {} GiB; Total non KV cache memory: {} GiB; torch peak memory increase: {} GiB; "
        "non-torch forward increase memory: {} GiB.",
    ]
    lines = []
    for _ in range(draw(st.integers(0, 5))):
        template = draw(st.sampled_from(templates))
        values = [
            draw(st.sampled_from([*NUMBER_TEXT, "15.26", "3901", "0.8"])) for _ in range(template.count("{}"))
        ]
        lines.append(corpus.LOG_PREFIX + template.format(*values))
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


def _vllm_result_base() -> dict[str, Any]:
    return json.loads(
        (Path(__file__).parent / "fixtures" / "bench_results" / "vllm_bench_serve.json").read_text()
    )


@st.composite
def trace_csv(draw: st.DrawFn) -> bytes:
    """A `simulate --trace` CSV: a few good rows, 0-2 cells of each replaced by hostile text."""
    cells = st.one_of(
        st.sampled_from([*NUMBER_TEXT, "1e300", "-1e-300", LONG_FIELD]),
        st.text(max_size=6).filter(lambda s: "," not in s and "\n" not in s),
    )
    rows = []
    for i in range(draw(st.integers(0, 6))):
        fields = [f"{0.5 * i:g}", str(64 * (i + 1)), str(8 * (i + 1))]
        for _ in range(draw(st.integers(0, 2))):
            fields[draw(st.integers(0, 2))] = draw(cells)
        rows.append(",".join(fields) + "\n")
    header = corpus.TRACE_HEADER if draw(st.integers(0, 5)) else "arrival_s,input_tokens\n"
    return (header + "".join(rows)).encode("utf-8", "surrogatepass")


@st.composite
def length_list(draw: st.DrawFn) -> bytes:
    """An `--input-tokens empirical:FILE` list: one token count per line, some hostile."""
    lines = draw(
        st.lists(st.one_of(st.sampled_from([*NUMBER_TEXT, "128", "# c"]), st.text(max_size=5)), max_size=6)
    )
    return "\n".join(lines).encode("utf-8", "surrogatepass")


FILE_TARGETS: dict[str, tuple[str, Any]] = {
    # name: (file name, strategy); the command lines are in file_commands()
    "model card": ("card.yaml", mutated_bytes(_card_base(), _yaml_dump)),
    "hardware profile": ("profile.yaml", mutated_bytes(_profile_base(), _yaml_dump)),
    "bench csv": ("points.csv", bench_csv()),
    "hf config.json": ("config.json", mutated_bytes(corpus._hf_base(), _json_dump)),
    "mindie base": ("base.json", mutated_bytes(corpus._mindie_base(), _json_dump)),
    "mindie log": ("mindie.log", mindie_log()),
    "simulate trace": ("trace.csv", trace_csv()),
    "vllm bench result": ("result.json", mutated_bytes(_vllm_result_base(), _json_dump)),
    "empirical lengths": ("lengths.txt", length_list()),
}


def file_commands(target: str, path: str) -> list[list[str]]:
    return {
        "model card": [
            ["--model", path, "--json"],
            ["mindie", "--model", path, "--weights-path", "/w", "--out", "config.json", "--json"],
        ],
        "hardware profile": [
            ["--model", "qwen3-8b", "--card", path, "--json"],
            ["serve", "-m", "qwen3-8b", "--card", path, "--json"],
        ],
        "bench csv": [
            ["validate", path, "--card", "ascend-950pr"],
            ["calibrate", "--card", "ascend-950pr", "--from-bench", path, "--out", "fit.yaml"],
        ],
        "hf config.json": [["models", "import", path], ["models", "import", path, "--out", "card.yaml"]],
        "mindie base": [
            ["mindie", "--model", "qwen3-8b", "--base", path, "--out", "config.json", "--json"],
            ["mindie", "--model", "qwen3-8b", "--base", path, "--mtp", "1"],
        ],
        "simulate trace": [
            ["simulate", "-m", "qwen3-8b", "--trace", path, "--json"],
            ["simulate", "-m", "qwen3-8b", "--trace", path, "--pd", "1:1", "--out", "r.csv"],
        ],
        "vllm bench result": [
            ["bench", "import", path, "-m", "qwen3-8b", "--card", "ascend-910b3"],
            ["bench", "import", path, "-m", "qwen3-8b", "--card", "ascend-910b3", "--out", "rows.csv"],
        ],
        "empirical lengths": [
            [
                "simulate",
                "-m",
                "qwen3-8b",
                "--rate",
                "2",
                "--requests",
                "50",
                "--input-tokens",
                f"empirical:{path}",
            ],
            [
                "simulate",
                "-m",
                "qwen3-8b",
                "--concurrency",
                "4",
                "--requests",
                "50",
                "--output-tokens",
                f"empirical:{path}",
                "--json",
            ],
        ],
        "mindie log": [
            ["mindie", "--model", "qwen3-8b", "--weights-path", "/w", "--from-log", path, "--json"],
            ["mindie", "--model", "qwen3-8b", "--weights-path", "/w", "--from-log", path],
        ],
    }[target]


@pytest.mark.parametrize("target", sorted(FILE_TARGETS))
def test_fuzz_malformed_files(target: str) -> None:
    name, strategy = FILE_TARGETS[target]

    @FUZZ
    @given(strategy)
    def fuzz(data: bytes) -> None:
        with tempfile.TemporaryDirectory(prefix="kvplan-fuzz-file-") as tmp:
            path = Path(tmp) / name
            path.write_bytes(data)
            commands = file_commands(target, str(path))
            # both command lines on the same file, two processes at once
            with ThreadPoolExecutor(2) as pool:
                runs = list(pool.map(lambda args: run_kvplan(args, cwd=Path(tmp)), commands))
            failures = [(p, r) for r in runs if (p := broken_promises(r))]
            assert not failures, f"file {name} = {data[:400]!r}\n" + "\n".join(
                "; ".join(p) + "\n" + r.describe() for p, r in failures
            )

    fuzz()


# --- every writer and every file flag on special files (issue 26 S1, H1), discovered from --help ----------


def special_file_cases(surface: dict[str, tuple[dict[str, str], list[str]]]) -> list[list[str]]:
    """Each output flag of each command onto a FIFO and a directory link (with --force where the command
    has it), and each input path flag / path argument given a FIFO; BASES gives the rest of the line."""
    cases = []
    for command, (options, arguments) in sorted(surface.items()):
        force = ["--force"] if "--force" in options else []
        for flag in sorted(set(options) & OUTPUT_FLAGS):
            cases += [[*BASES[command], flag, target, *force] for target in (FIFO, DIR_LINK)]
        inputs = [f for f, kind in options.items() if kind == "path" and f not in OUTPUT_FLAGS]
        cases += [[*BASES[command], flag, FIFO] for flag in sorted(inputs)]
        if "path" in arguments:
            args = list(BASES[command])
            args[len(command.split())] = FIFO
            cases.append(args)
    return cases


def test_every_writer_and_reader_on_special_files(cli_surface) -> None:
    """No writer replaces a FIFO or a directory, --force or not; no reader blocks on a FIFO."""
    cases = special_file_cases(cli_surface)
    writers = [c for c in cases if any(f in OUTPUT_FLAGS for f in c)]
    assert len(writers) >= 2 * 6, f"expected the six writers of issue 26 S1, found {writers}"
    for start in range(0, len(cases), 8):
        assert_batch(cases[start : start + 8])
