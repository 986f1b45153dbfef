"""The hostile-file corpus of issue 14: what each file is, and how it is made.

`python -m tests.hostile.corpus` rewrites the small committed files under tests/hostile/<kind>/ from the
repository's own data files (so they stay in step with the schema). Large files (10^5-row CSVs, configs
over the size limit, 10^5-deep JSON) are never committed: `write_large(dir)` makes them at test time.
Kinds: modelcards/ (card YAML for --model), profiles/ (hardware YAML for --card), bench/ (CSV for validate
and calibrate --from-bench), hfconfigs/ (config.json for models import), mindie-base/ (config.json for
mindie --base), mindie-logs/ (for mindie --from-log), traces/ (`simulate --trace` CSVs and
`--input-tokens empirical:FILE` length lists).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import GEOMETRY_KEYS

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KINDS = ("modelcards", "profiles", "bench", "hfconfigs", "mindie-base", "mindie-logs", "traces")
BIG_DIGITS = "9" * 400  # a 400-digit integer: int() takes it, float() and C code overflow
DEEP = 100_000  # nesting depth that overflows any recursive parser


def _yaml(data: Any) -> bytes:
    return yaml.safe_dump(data, sort_keys=False).encode()


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(base)
    for key, value in changes.items():
        data[key] = value
    return data


def _raw(base: dict[str, Any], key: str, literal: str) -> bytes:
    """YAML of `base` with `key` set to a literal (e.g. .nan, a 400-digit integer) written verbatim."""
    text = _yaml(_with(base, **{key: 12345678})).decode()
    return text.replace(f"{key}: 12345678", f"{key}: {literal}").encode()


def model_cards() -> dict[str, bytes]:
    qwen = yaml.safe_load((REPO / "modelcards" / "qwen3-8b.yaml").read_text())
    deepseek = yaml.safe_load((REPO / "modelcards" / "deepseek-v3.yaml").read_text())
    missing = {k: v for k, v in qwen.items() if k not in ("num_hidden_layers", "head_dim")}
    alias_bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
    )
    return {
        "missing-fields.yaml": _yaml(missing),
        "heads-zero.yaml": _yaml(_with(qwen, num_attention_heads=0)),
        "kv-heads-zero.yaml": _yaml(_with(qwen, num_key_value_heads=0)),
        "layers-1e9.yaml": _yaml(_with(qwen, num_hidden_layers=10**9)),
        "head-dim-negative.yaml": _yaml(_with(qwen, head_dim=-128)),
        "hidden-nan.yaml": _raw(qwen, "hidden_size", ".nan"),
        "vocab-inf.yaml": _raw(qwen, "vocab_size", ".inf"),
        "vocab-400-digits.yaml": _raw(qwen, "vocab_size", BIG_DIGITS),
        "wrong-types.yaml": _yaml(_with(qwen, hidden_size="big", num_hidden_layers=[1, 2])),
        "layers-bool.yaml": _yaml(_with(qwen, num_hidden_layers=True)),
        "not-a-mapping.yaml": b"- qwen3-8b\n- 64\n",
        "empty.yaml": b"",
        "non-utf8.yaml": _yaml(qwen).replace(b"name: ", b"name: \xff\xfe\xc3("),
        "deep-nesting.yaml": _yaml(qwen) + b"extra: " + b"[" * 5000 + b"]" * 5000 + b"\n",
        "alias-bomb.yaml": alias_bomb.encode() + _yaml(qwen),
        "deepseek-first-k-dense-1000.yaml": _yaml(_with(deepseek, first_k_dense_replace=1000)),
        "deepseek-kv-lora-zero.yaml": _yaml(_with(deepseek, kv_lora_rank=0)),
        "deepseek-experts-per-tok-over-experts.yaml": _yaml(_with(deepseek, num_experts_per_tok=1000)),
    }


def profiles() -> dict[str, bytes]:
    card = yaml.safe_load((REPO / "hwprofiles" / "ascend-950pr.yaml").read_text())
    nan_peak = _yaml(card).replace(b"  bf16: 500", b"  bf16: .nan")
    nan_coefficient = _yaml(card).replace(b"kernel_overhead_us: 8", b"kernel_overhead_us: .nan")
    return {
        "peak-nan.yaml": nan_peak,
        "memory-inf.yaml": _raw(card, "memory_capacity_gib", ".inf"),
        "memory-nan.yaml": _raw(card, "memory_capacity_gib", ".nan"),
        "memory-zero.yaml": _yaml(_with(card, memory_capacity_gib=0)),
        "memory-denormal.yaml": _raw(card, "memory_capacity_gib", "1.0e-320"),
        "memory-400-digits.yaml": _raw(card, "memory_capacity_gib", BIG_DIGITS),
        "bandwidth-negative.yaml": _yaml(_with(card, memory_bandwidth_gb_per_s=-1600)),
        "bandwidth-inf.yaml": _raw(card, "memory_bandwidth_gb_per_s", ".inf"),
        "coefficient-nan.yaml": nan_coefficient,
        "runtime-overhead-huge.yaml": _yaml(_with(card, runtime_overhead_gib=1e300)),
        "non-utf8.yaml": _yaml(card).replace(b"name: ", b"name: \xff\xfe\xc3("),
        "not-a-mapping.yaml": b"[1, 2, 3]\n",
        "empty.yaml": b"",
    }


BENCH_HEADER = "model,card,dtype,kv_dtype,tp,batch,ctx,decode_step_s\n"


def bench_row(step: str, *, batch: str = "8", ctx: str = "4096") -> str:
    return f"qwen3-8b,ascend-950pr,bf16,bf16,1,{batch},{ctx},{step}\n"


def bench() -> dict[str, bytes]:
    good = [bench_row(f"{0.010 + 0.001 * i:.4f}", batch=str(2**i)) for i in range(6)]
    return {
        "nan-times.csv": (
            BENCH_HEADER + "".join(good[:3]) + bench_row("nan") + bench_row("NaN", batch="3")
        ).encode(),
        "inf-times.csv": (BENCH_HEADER + "".join(good[:3]) + bench_row("inf")).encode(),
        "zero-times.csv": (BENCH_HEADER + bench_row("0") + bench_row("0.0", batch="16")).encode(),
        "negative-times.csv": (BENCH_HEADER + "".join(good[:3]) + bench_row("-0.01")).encode(),
        "denormal-times.csv": (BENCH_HEADER + "".join(good[:3]) + bench_row("1e-320")).encode(),
        "one-point.csv": (BENCH_HEADER + good[0]).encode(),
        "contradictory.csv": (
            BENCH_HEADER + bench_row("0.010") + bench_row("90.0") + bench_row("0.000001")
        ).encode(),
        "identical-points.csv": (BENCH_HEADER + bench_row("0.02") * 5).encode(),
        "empty.csv": b"",
        "header-only.csv": BENCH_HEADER.encode(),
        "non-utf8.csv": (BENCH_HEADER + "".join(good[:3])).encode() + b"qwen3-8b\xff\xfe,ascend-950pr,bf16\n",
        "ctx-400-digits.csv": (BENCH_HEADER + "".join(good[:3]) + bench_row("0.02", ctx=BIG_DIGITS)).encode(),
        "batch-1e12.csv": (
            BENCH_HEADER + "".join(good[:3]) + bench_row("0.02", batch="1000000000000")
        ).encode(),
        "batch-text.csv": (BENCH_HEADER + "".join(good[:3]) + bench_row("0.02", batch="eight")).encode(),
        "nul-bytes.csv": (BENCH_HEADER + "".join(good[:3])).encode() + b"\x00\x00\x00\n",
    }


def _hf_base() -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "_name_or_path": "meta-llama/Llama-3.1-8B",
    }


def _hf_deepseek() -> dict[str, Any]:
    card = yaml.safe_load((REPO / "modelcards" / "deepseek-v3.yaml").read_text())
    # the card's geometry as HF states it: not the card's own derived attention kind, nor attention_bias
    config = {
        k: v for k, v in card.items() if k in GEOMETRY_KEYS and k not in ("attention", "attention_bias")
    }
    config.update(
        architectures=["DeepseekV3ForCausalLM"],
        torch_dtype="bfloat16",
        moe_layer_freq=1,
        _name_or_path="deepseek-ai/DeepSeek-V3",
    )
    return config


def _json(data: Any) -> bytes:
    return json.dumps(data, indent=1).encode()


def hf_configs() -> dict[str, bytes]:
    base = _hf_base()
    nan = _json(_with(base, hidden_size=12345678)).replace(b"12345678", b"NaN")
    inf = _json(_with(base, vocab_size=12345678)).replace(b"12345678", b"Infinity")
    return {
        "heads-zero.json": _json(_with(base, num_attention_heads=0)),
        "kv-heads-zero.json": _json(_with(base, num_key_value_heads=0)),
        "layers-1e9.json": _json(_with(base, num_hidden_layers=10**9)),
        "hidden-nan.json": nan,
        "vocab-infinity.json": inf,
        "vocab-400-digits.json": _json(_with(base, vocab_size=12345678)).replace(
            b"12345678", BIG_DIGITS.encode()
        ),
        "wrong-types.json": _json(_with(base, hidden_size="4096", num_hidden_layers=[32])),
        "missing-fields.json": _json({k: v for k, v in base.items() if k != "num_hidden_layers"}),
        "not-an-object.json": b"[1, 2, 3]",
        "text-config-not-object.json": _json(_with(base, text_config=5)),
        "non-utf8.json": _json(base).replace(b'"meta-llama', b'"\xff\xfe\xc3('),
        "deep-nesting.json": b'{"model_type": "llama", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        "deepseek-first-k-dense-1000.json": _json(_with(_hf_deepseek(), first_k_dense_replace=1000)),
        "empty.json": b"",
    }


MODEL = ("BackendConfig", "ModelDeployConfig", "ModelConfig")


def _mindie_base() -> dict[str, Any]:
    return json.loads((REPO / "planner" / "data" / "mindie-config-2.x.json").read_text())


def _with_model(**changes: Any) -> bytes:
    base = _mindie_base()
    base["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0].update(changes)
    return _json(base)


def mindie_bases() -> dict[str, bytes]:
    base = _mindie_base()
    not_list = copy.deepcopy(base)
    not_list["BackendConfig"]["ModelDeployConfig"]["ModelConfig"] = {"modelName": "x"}
    empty_list = copy.deepcopy(base)
    empty_list["BackendConfig"]["ModelDeployConfig"]["ModelConfig"] = []
    backend_null = _with(base, BackendConfig=None)
    nan = _json(base).replace(b'"maxSeqLen": 2560', b'"maxSeqLen": NaN')
    return {
        "not-an-object.json": b"[]",
        "a-string.json": b'"config"',
        "plugin-params-number.json": _with_model(plugin_params=5),
        "plugin-params-object.json": _with_model(plugin_params={"plugin_type": "mtp"}),
        "plugin-params-bad-json.json": _with_model(plugin_params="{not json"),
        "plugin-params-list-string.json": _with_model(plugin_params="[1, 2]"),
        "model-config-not-list.json": _json(not_list),
        "model-config-empty-list.json": _json(empty_list),
        "backend-null.json": _json(backend_null),
        "max-seq-len-nan.json": nan,
        "non-utf8.json": _json(base).replace(b'"llama_65b"', b'"\xff\xfe\xc3("'),
        "deep-nesting.json": b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        "empty.json": b"",
    }


LOG_PREFIX = "[2026-05-02 10:11:12.345+08:00] [4711] [INFO] [llm] "


def mindie_logs() -> dict[str, bytes]:
    def log(*lines: str) -> bytes:
        return "".join(LOG_PREFIX + line + "\n" for line in lines).encode()

    return {
        "empty.log": b"",
        "no-figures.log": log("server started", "nothing to see"),
        "non-utf8.log": log("Model loading took 15.26 GiB memory.")
        + b"\xff\xfe\xc3(\n"
        + log("NpuBlockNum: 3901"),
        "block-num-400-digits.log": log(f"CpuBlockNum:0; NpuBlockNum: {BIG_DIGITS}"),
        "block-num-negative.log": log("CpuBlockNum:0; NpuBlockNum: -5"),
        "block-num-zero.log": log("CpuBlockNum:0; NpuBlockNum: 0"),
        "allocated-nan.log": log("Allocated nan (GiB) NPU memory for KVcache. Model role: standard"),
        "allocated-inf.log": log("Allocated inf (GiB) NPU memory for KVcache. Model role: standard"),
        "allocated-huge.log": log(
            f"Allocated {BIG_DIGITS}.5 (GiB) NPU memory for KVcache. Model role: standard"
        ),
        "total-memory-zero.log": log(
            "Total npu memory: 0.00 GiB; Total non KV cache memory: 20.71 GiB; torch peak memory increase: "
            "0.52 GiB; non-torch forward increase memory: 4.93 GiB.",
            "Allocated 30.49 (GiB) NPU memory for KVcache. Model role: standard",
        ),
        "nul-bytes.log": b"\x00" * 4096,
    }


SERVING_HEADER = (
    "model,card,dtype,kv_dtype,tp,engine,concurrency,input_tokens,output_tokens,output_tokens_per_s,mtp,dp\n"
)


def serving_row(
    *, tp: str = "1", concurrency: str = "8", mtp: str = "", dp: str = "", tps: str = "500"
) -> str:
    return f"qwen3-8b,ascend-950pr,bf16,,{tp},vllm,{concurrency},1024,256,{tps},{mtp},{dp}\n"


def serving_bench() -> dict[str, bytes]:
    """Serving-level bench rows (output_tokens_per_s) for validate / calibrate --from-bench."""
    good = serving_row(concurrency="16", tps="900")

    def two(row: str) -> bytes:
        return (SERVING_HEADER + row + good).encode()

    return {
        "serving-tp-1e8.csv": two(serving_row(tp="100000000")),
        "serving-mtp-99.csv": two(serving_row(mtp="99")),
        "serving-concurrency-1e11.csv": two(serving_row(concurrency="100000000000")),
        "serving-dp-1e9.csv": two(serving_row(dp="1000000000")),
        "serving-tps-nan.csv": two(serving_row(tps="nan")),
        "serving-tps-1e-320.csv": two(serving_row(tps="1e-320")),
        "serving-concurrency-zero.csv": two(serving_row(concurrency="0")),
    }


def _vllm_result(**changes: Any) -> bytes:
    """A `vllm bench serve --save-result` JSON (the repository's fixture) with fields changed."""
    fixture = REPO / "tests" / "fixtures" / "bench_results" / "vllm_bench_serve.json"
    return _json(_with(json.loads(fixture.read_text()), **changes))


def bench_results() -> dict[str, bytes]:
    """Result files for `kvplan bench import` (vllm bench JSON; the tool is read from the content)."""
    return {
        "result-completed-denormal.json": _vllm_result(completed=5e-324),
        "result-completed-zero.json": _vllm_result(completed=0),
        "result-duration-zero.json": _vllm_result(duration=0),
        "result-ttft-zero.json": _vllm_result(mean_ttft_ms=0),
        "result-tpot-denormal.json": _vllm_result(mean_tpot_ms=5e-324),
        "result-throughput-denormal.json": _vllm_result(output_throughput=5e-324),
        "result-input-tokens-huge.json": _vllm_result(total_input_tokens=1e300, completed=1),
        "result-throughput-nan.json": _json(
            json.loads(_vllm_result(output_throughput=12345).decode())
        ).replace(b"12345", b"NaN"),
        "result-not-object.json": b"[1, 2]",
    }


TRACE_HEADER = "arrival_s,input_tokens,output_tokens\n"


def traces() -> dict[str, bytes]:
    """`simulate --trace` CSVs (trace-*.csv) and `empirical:FILE` token-length lists (lengths-*.txt)."""

    def trace(*rows: str) -> bytes:
        return (TRACE_HEADER + "".join(row + "\n" for row in rows)).encode()

    return {
        "trace-empty.csv": b"",
        "trace-header-only.csv": trace(),
        "trace-bad-header.csv": b"time,in,out\n0,10,10\n",
        "trace-bom.csv": b"\xef\xbb\xbf" + trace("0,10,10"),
        "trace-negative-time.csv": trace("-1,100,10"),
        "trace-nan-time.csv": trace("nan,100,10"),
        "trace-inf-tokens.csv": trace("0,inf,10"),
        "trace-zero-tokens.csv": trace("0,0,10"),
        "trace-fraction-tokens.csv": trace("0,10.5,10"),
        "trace-400-digits.csv": trace(f"0,{BIG_DIGITS},10"),
        "trace-tokens-over-limit.csv": trace("0,1073741824,1073741824"),
        "trace-time-1e300.csv": trace("0,100,10", "1e300,100,10"),
        "trace-unsorted.csv": trace("5,100,10", "1,100,10", "3,10,5"),
        "trace-short-row.csv": trace("0,10,10", "0"),
        "trace-nul-bytes.csv": trace("0,1\x0000,10"),
        "trace-non-utf8.csv": TRACE_HEADER.encode() + b"0,\xff\xfe,10\n",
        "trace-unclosed-quote.csv": trace('"0,10,10'),
        "lengths-superscript-digit.txt": "\u00b2\n".encode(),
        "lengths-arabic-digits.txt": "\u0661\u0662\n".encode(),
        "lengths-zero.txt": b"0\n",
        "lengths-400-digits.txt": (BIG_DIGITS + "\n").encode(),
        "lengths-empty.txt": b"# only a comment\n",
        "lengths-non-utf8.txt": b"12\n\xff\n",
    }


def build() -> dict[str, bytes]:
    """Every committed corpus file, keyed by its path relative to tests/hostile/."""
    groups = {
        "modelcards": model_cards(),
        "profiles": profiles(),
        "bench": {**bench(), **serving_bench(), **bench_results()},
        "hfconfigs": hf_configs(),
        "mindie-base": mindie_bases(),
        "mindie-logs": mindie_logs(),
        "traces": traces(),
    }
    return {f"{kind}/{name}": data for kind, files in groups.items() for name, data in files.items()}


def corpus_files(kind: str) -> list[Path]:
    return sorted(p for p in (HERE / kind).iterdir() if p.is_file())


def write_large(directory: Path) -> dict[str, Path]:
    """Large hostile files, made at test time: name -> path."""
    directory.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}

    def put(name: str, data: bytes) -> None:
        paths[name] = directory / name
        paths[name].write_bytes(data)

    rows = "".join(
        bench_row(f"{0.01 + (i % 97) * 1e-4:.5f}", batch=str(1 + i % 256), ctx=str(256 * (1 + i % 64)))
        for i in range(100_000)
    )
    put("bench-1e5-rows.csv", (BENCH_HEADER + rows).encode())
    put("hf-deep-1e5.json", b'{"model_type": "llama", "x": ' + b"[" * DEEP + b"]" * DEEP + b"}")
    put("mindie-base-deep-1e5.json", b'{"x": ' + b"[" * DEEP + b"]" * DEEP + b"}")
    pad = b" " * (11 * 2**20)  # past the 10 MiB limit the mindie --base reader states
    put("mindie-base-11MiB.json", _json(_mindie_base())[:-1] + pad + b"}")
    put("mindie-log-11MiB.log", (LOG_PREFIX + "x" * 1000 + "\n").encode() * (11 * 2**10))
    put("model-card-11MiB.yaml", (REPO / "modelcards" / "qwen3-8b.yaml").read_bytes() + b"#" * (11 * 2**20))
    put("trace-300k-rows.csv", (TRACE_HEADER + "0.5,10,10\n" * 300_000).encode())  # > 200000 requests
    return paths


def main() -> None:
    for rel, data in build().items():
        path = HERE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    print(f"wrote {len(build())} files under {HERE}")


if __name__ == "__main__":
    main()
