"""MindIE config.json as a file format: the pinned base configs, parsing, rendering, and MindIE's
documented ranges and inter-field rules, checked before anything is written.

Source: MindIE-LLM docs/zh/user_guide/user_manual/service_parameter_configuration.md (master 8b4871ad31f5),
summarised in ascend-mindie-facts.md 1.2 and 1.3. Kept apart from config.py so that each module stays
readable; this one knows only config.json paths, never the plan.
Messages: `<field path>: <what is wrong> (got <value>, expected <constraint>)[; hint]`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from planner import readers, units
from planner.engines.mindie import limits
from planner.errors import DataFileError, PlanInputError
from planner.records import record

MindieConfig = dict[str, Any]  # a parsed MindIE config.json (JSON object)

PLANNER_DIR = Path(__file__).resolve().parents[2]  # the package folder, planner/data/ inside it
MINDIE_BASE_FILES = {"2.x": "mindie-config-2.x.json", "1.0.RC3": "mindie-config-1.0.RC3.json"}
DEFAULT_MINDIE_VERSION = "2.x"
MAX_CONFIG_BYTES = 10 * units.MIB_BYTES  # [DOC] a config outside (0 MB, 10 MB] is rejected

DEPLOY: tuple[str | int, ...] = ("BackendConfig", "ModelDeployConfig")
MODEL: tuple[str | int, ...] = (*DEPLOY, "ModelConfig", 0)
SCHEDULE: tuple[str | int, ...] = ("BackendConfig", "ScheduleConfig")
UINT32_MAX = 4_294_967_295
INT32_MAX = 2_147_483_647
MAX_TOKENS = 4_194_304  # [DOC] maxInputTokenLen / maxPrefillTokens upper bound
BLOCK_MULTIPLE = 16  # [DOC] cacheBlockSize other than 128 should be a multiple of 16
MAX_BLOCK_TOKENS = 128  # [DOC] cacheBlockSize range [1, 128]
BACKEND_TYPES = ("atb", "ms")
MTP_TOKENS = (1, 2)  # [mtp.md] num_speculative_tokens: the table says 1, the prose 1 or 2
# modelName: 1-256 of letters, digits, '_', '.', '-', first and last a letter or digit, else the server does
# not start (src/config_manager/model_deploy_config.cpp:423-443 CheckModelNameLength @8b4871a; the docs'
# service_parameter_configuration.md:124)
MODEL_NAME_PATTERN = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,254}[A-Za-z0-9])?"
MODEL_NAME_RULE = (
    "MindIE's modelName: 1-256 letters, digits, '_', '.' or '-', first and last a letter or digit"
)


@record
class RangeRule:
    """An integer field that must lie in [lo, hi]."""

    path: tuple[str | int, ...]
    lo: int
    hi: int
    hint: str = ""


RANGE_RULES: tuple[RangeRule, ...] = (
    RangeRule(("BackendConfig", "modelInstanceNumber"), 1, 10),
    RangeRule((*DEPLOY, "maxSeqLen"), 1, UINT32_MAX, "set --ctx"),
    RangeRule((*DEPLOY, "maxInputTokenLen"), 1, MAX_TOKENS, "set --max-input-tokens"),
    RangeRule((*MODEL, "worldSize"), 1, UINT32_MAX, "set --tp"),
    RangeRule((*MODEL, "cpuMemSize"), 0, UINT32_MAX),
    RangeRule((*SCHEDULE, "cacheBlockSize"), 1, MAX_BLOCK_TOKENS, "set --block-size 128"),
    RangeRule((*SCHEDULE, "maxPrefillBatchSize"), 0, limits.MAX_BATCH_SIZE),  # <= maxBatchSize: below
    RangeRule((*SCHEDULE, "maxPrefillTokens"), 1, MAX_TOKENS, "set --max-prefill-tokens"),
    RangeRule((*SCHEDULE, "prefillTimeMsPerReq"), 0, 1000),
    RangeRule((*SCHEDULE, "decodeTimeMsPerReq"), 0, 1000),
    RangeRule((*SCHEDULE, "maxBatchSize"), 1, limits.MAX_BATCH_SIZE, "set --batch"),
    RangeRule((*SCHEDULE, "maxIterTimes"), 1, UINT32_MAX, "set --max-output-tokens"),
    RangeRule((*SCHEDULE, "maxPreemptCount"), 0, limits.MAX_BATCH_SIZE),  # <= maxBatchSize: below
    RangeRule((*SCHEDULE, "maxQueueDelayMicroseconds"), 500, 1_000_000),
)

# (left, relation, right, hint): left <relation> right must hold.
RELATION_RULES: tuple[tuple[tuple[str | int, ...], str, tuple[str | int, ...], str], ...] = (
    (
        (*SCHEDULE, "maxPrefillTokens"),
        ">=",
        (*DEPLOY, "maxInputTokenLen"),
        "raise --max-prefill-tokens or lower --max-input-tokens",
    ),
    ((*SCHEDULE, "maxIterTimes"), "<=", (*DEPLOY, "maxSeqLen"), "lower --max-output-tokens"),
    ((*SCHEDULE, "maxBatchSize"), ">=", (*SCHEDULE, "maxPreemptCount"), ""),
    ((*SCHEDULE, "maxPrefillBatchSize"), "<=", (*SCHEDULE, "maxBatchSize"), "0 means maxBatchSize"),
)
BOOL_FIELDS = ((*DEPLOY, "truncation"), (*SCHEDULE, "supportSelectBatch"))


def dotted(path: tuple[str | int, ...]) -> str:
    """MindIE-doc spelling of a path: BackendConfig.ModelDeployConfig.ModelConfig[0].npuMemSize."""
    return ".".join(f"[{p}]" if isinstance(p, int) else p for p in path).replace(".[", "[")


def _value(cfg: dict[str, Any], path: tuple[str | int, ...], expected: str) -> Any:
    node: Any = cfg
    for part in path:
        ok = (isinstance(part, int) and isinstance(node, list) and part < len(node)) or (
            isinstance(part, str) and isinstance(node, dict) and part in node
        )
        if not ok:
            raise PlanInputError(f"{dotted(path)}: missing (got nothing, expected {expected})")
        node = node[part]
    return node


FieldPath = tuple[str | int, ...]


def _fail(path: FieldPath, what: str, got: object, expected: str, hint: str = "") -> PlanInputError:
    suffix = f"; {hint}" if hint else ""
    return PlanInputError(f"{dotted(path)}: {what} (got {got!r}, expected {expected}){suffix}")


def _integer(cfg: dict[str, Any], path: tuple[str | int, ...], expected: str) -> int:
    value = _value(cfg, path, expected)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, "must be an integer", value, expected)
    return value


def check_ranges(cfg: dict[str, Any]) -> None:
    """Every RANGE_RULES field is an integer in [lo, hi]; booleans are booleans."""
    for rule in RANGE_RULES:
        expected = f"[{rule.lo}, {rule.hi}]"
        value = _integer(cfg, rule.path, expected)
        if not rule.lo <= value <= rule.hi:
            raise _fail(rule.path, "out of MindIE's range", value, expected, rule.hint)
    for path in BOOL_FIELDS:
        value = _value(cfg, path, "true or false")
        if not isinstance(value, bool):
            raise _fail(path, "must be a boolean", value, "true or false")


def check_relations(cfg: dict[str, Any]) -> None:
    """MindIE's inter-field rules (RELATION_RULES)."""
    for left, relation, right, hint in RELATION_RULES:
        lhs, rhs = _integer(cfg, left, "an integer"), _integer(cfg, right, "an integer")
        if not (lhs >= rhs if relation == ">=" else lhs <= rhs):
            raise _fail(left, f"must be {relation} {dotted(right)}", lhs, f"{relation} {rhs}", hint)


def check_model_config(cfg: dict[str, Any]) -> None:
    """npuMemSize range, backendType, preemption needs cpuMemSize, block size multiple of 16."""
    npu_mem = _integer(cfg, (*MODEL, "npuMemSize"), f"-1 or [1, {INT32_MAX}]")
    if npu_mem != -1 and not 1 <= npu_mem <= INT32_MAX:
        raise _fail((*MODEL, "npuMemSize"), "out of MindIE's range", npu_mem, f"-1 or [1, {INT32_MAX}]")
    backend = _value(cfg, (*MODEL, "backendType"), " or ".join(BACKEND_TYPES))
    if backend not in BACKEND_TYPES:
        raise _fail((*MODEL, "backendType"), "unknown backend", backend, " or ".join(BACKEND_TYPES))
    preempt = _integer(cfg, (*SCHEDULE, "maxPreemptCount"), "an integer")
    if preempt > 0 and _integer(cfg, (*MODEL, "cpuMemSize"), "an integer") <= 0:
        cpu = _value(cfg, (*MODEL, "cpuMemSize"), "")
        raise _fail(
            (*MODEL, "cpuMemSize"),
            f"must be > 0 when maxPreemptCount is {preempt} (preemption swaps KV to host memory)",
            cpu,
            "> 0",
        )
    block = _integer(cfg, (*SCHEDULE, "cacheBlockSize"), "an integer")
    if block % BLOCK_MULTIPLE:
        raise _fail(
            (*SCHEDULE, "cacheBlockSize"),
            "must be a multiple of 16",
            block,
            "16, 32, 64 or 128",
            "set --block-size 128 (MindIE's advice)",
        )


def check_devices(cfg: dict[str, Any]) -> None:
    """One set of distinct non-negative ids per instance, each as large as worldSize."""
    instances = _integer(cfg, ("BackendConfig", "modelInstanceNumber"), "[1, 10]")
    world = _integer(cfg, (*MODEL, "worldSize"), "an integer")
    path = ("BackendConfig", "npuDeviceIds")
    ids = _value(cfg, path, "a list of id lists")
    if not isinstance(ids, list) or len(ids) != instances:
        raise _fail(path, "needs one id list per model instance", ids, f"{instances} list(s)")
    for group in ids:
        ints = isinstance(group, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in group)
        if not ints or len(set(group)) != len(group) or min(group, default=-1) < 0:
            raise _fail(path, "ids must be distinct integers >= 0", group, "e.g. [0, 1]")
        if len(group) != world:
            raise _fail(
                (*MODEL, "worldSize"),
                f"must equal the number of devices in {dotted(path)}",
                world,
                str(len(group)),
                "set --devices and --tp together",
            )


def check_plugins(cfg: dict[str, Any]) -> None:
    """plugin_params is a JSON string; MTP takes 1-2 tokens and excludes SplitFuse (templateType Mix)."""
    path = (*MODEL, "plugin_params")
    model = _value(cfg, MODEL, "a model config")
    if "plugin_params" not in model:
        return
    raw = model["plugin_params"]
    try:
        params = readers.parse_json(raw, where=dotted(path)) if isinstance(raw, str) else None
    except DataFileError:
        params = None
    if not isinstance(params, dict):
        raise _fail(path, "must be a JSON object in a string", raw, '\'{"plugin_type":"mtp",...}\'')
    if "mtp" not in str(params.get("plugin_type", "")).split(","):
        return
    tokens = params.get("num_speculative_tokens")
    if tokens not in MTP_TOKENS:
        raise _fail(path, "MTP num_speculative_tokens out of MindIE's range", tokens, "1 or 2", "set --mtp 1")
    template = _value(cfg, (*SCHEDULE, "templateType"), "Standard or Mix")
    if template == "Mix":
        raise _fail(
            (*SCHEDULE, "templateType"), "MTP cannot be combined with SplitFuse", template, "Standard"
        )


def check_model_name(cfg: dict[str, Any]) -> None:
    """modelName is a name MindIE's server accepts (MODEL_NAME_PATTERN)."""
    path = (*MODEL, "modelName")
    name = _value(cfg, path, MODEL_NAME_RULE)
    if not isinstance(name, str) or re.fullmatch(MODEL_NAME_PATTERN, name) is None:
        shown = name[:60] if isinstance(name, str) else name
        raise _fail(
            path, "not a name MindIE's server starts with", shown, MODEL_NAME_RULE, "set --model-name"
        )


def validate_config(cfg: dict[str, Any]) -> None:
    """Raise PlanInputError on the first field that breaks MindIE's documented ranges or rules."""
    check_ranges(cfg)
    check_model_name(cfg)
    check_relations(cfg)
    check_model_config(cfg)
    check_devices(cfg)
    check_plugins(cfg)


def load_base(version: str) -> dict[str, Any]:
    """The committed base config pinned to a MindIE layout (planner/data/)."""
    if version not in MINDIE_BASE_FILES:
        raise PlanInputError(
            f"--mindie-version: unknown layout (got {version!r}, expected one of "
            f"{', '.join(MINDIE_BASE_FILES)})"
        )
    text = (PLANNER_DIR / "data" / MINDIE_BASE_FILES[version]).read_text(encoding="utf-8")
    return parse_config_text(text, source=f"planner/data/{MINDIE_BASE_FILES[version]}")


def parse_config_text(text: str, *, source: str) -> dict[str, Any]:
    """A config.json's text as a dict; DataFileError names the source when it is not a MindIE-sized object."""
    size = len(text.encode("utf-8"))
    if not 0 < size <= MAX_CONFIG_BYTES:
        raise DataFileError(f"{source}: size out of MindIE's range (got {size} bytes, expected (0, 10 MiB])")
    return readers.json_object(text, where=source)


def render_config(cfg: dict[str, Any]) -> str:
    """config.json text: 4-space indent as MindIE ships it, UTF-8 kept."""
    import json  # here: a plan imports this module, only `kvplan mindie` writes a config

    return json.dumps(cfg, indent=4, ensure_ascii=False) + "\n"
