"""The prefill/decode disaggregated deployments behind the corpus's disaggregated vllm-ascend rows, as read
from the file each row cites at the commit it cites (vllm-project/vllm-ascend, read with `git show
COMMIT:PATH` on a mirror of the repository, 2026-12-05).

The corpus row keeps the first deployment's tp/dp/ep and max_num_seqs (the prefill side's); a P:D run needs
both sides, so each file's facts are copied here with what was read:
  prefill / decode   (instances, tp, dp) of each side: a side's DP ranks form one instance when its server
                     commands share one --data-parallel-address (internal_dp: --data-parallel-size with
                     --data-parallel-size-local per node, --headless on the other nodes; external_dp: the
                     `config:` block's dp_size / dp_size_local per node_index, one dp_address per role).
                     --enable-expert-parallel on every command: ep = tp x dp of that side.
  decode_max_seqs    the decode commands' --max-num-seqs (per DP rank), the batch cap that bounds throughput
  prefill_batched    the prefill commands' --max-num-batched-tokens (the prefill step's token budget)
  memory_fraction    the decode commands' --gpu-memory-utilization (the decode KV pool; kvplan takes one
                     --memory-fraction for both sides)
The KV moves between nodes (prefiller and decoder host indices differ in every file): the link is the card
profile's inter-node RoCE bandwidth per device (hwprofiles/ascend-910c.yaml
interconnect.inter_node_bandwidth_gb_per_s, 25 GB/s, NF), passed as --kv-link-gbps.
"""

from __future__ import annotations

from dataclasses import dataclass

REPO = "vllm-project/vllm-ascend"
# hwprofiles/ascend-910c.yaml interconnect.inter_node_bandwidth_gb_per_s: RoCE per device, per direction (NF)
INTER_NODE_LINK_GB_PER_S = 25


@dataclass(frozen=True)
class PdDeployment:
    """One disaggregated deployment as its config file states it (see the module docstring)."""

    prefill: tuple[int, int, int]  # (instances, tp, dp)
    decode: tuple[int, int, int]
    decode_max_seqs: int
    prefill_batched: int
    memory_fraction: float
    read: str  # what the file says, in words, so a reviewer can check it


QWEN3_LAYERWISE_TP8 = PdDeployment(
    prefill=(1, 8, 2),
    decode=(1, 8, 2),
    decode_max_seqs=16,
    prefill_batched=8192,
    memory_fraction=0.9,
    read="num_nodes 2 x 16; prefiller_host_index [0] decoder_host_index [1]; prefill: --data-parallel-size 2 "
    "--data-parallel-size-local 2 --tensor-parallel-size 8 --enable-expert-parallel --max-num-seqs 32 "
    "--max-num-batched-tokens 8192; decode: --data-parallel-size 2 --data-parallel-size-local 2 "
    "--tensor-parallel-size 8 --max-num-seqs 16 --max-num-batched-tokens 8192 --enable-expert-parallel, "
    "torchair graph; --gpu-memory-utilization 0.9 both; MooncakeLayerwiseConnector",
)
QWEN3_TP4_DECODE = PdDeployment(
    prefill=(1, 8, 2),
    decode=(1, 4, 4),
    decode_max_seqs=32,
    prefill_batched=8192,
    memory_fraction=0.9,
    read="num_nodes 2 x 16; prefiller_host_index [0] decoder_host_index [1]; prefill: --data-parallel-size 2 "
    "--data-parallel-size-local 2 --tensor-parallel-size 8 --max-num-seqs 32 --max-num-batched-tokens 8192 "
    "--enable-expert-parallel; decode: --data-parallel-size 4 --data-parallel-size-local 4 "
    "--tensor-parallel-size 4 --max-num-seqs 32 --max-num-batched-tokens 8192 --enable-expert-parallel, "
    "cudagraph_mode FULL_DECODE_ONLY; --gpu-memory-utilization 0.9 both; kv_connector_extra_config prefill "
    "dp 2 tp 8, decode dp 4 tp 4",
)


def deepseek_v32(
    *, prefill_seqs: int, prefill_batched: int, decode_seqs: int, decode_fraction: float
) -> PdDeployment:
    """DeepSeek-V3_2-W8A8-EP.yaml: 4 nodes, prefill dp 2 x tp 16 on nodes 0-1, decode dp 8 x tp 4 on 2-3."""
    return PdDeployment(
        prefill=(1, 16, 2),
        decode=(1, 4, 8),
        decode_max_seqs=decode_seqs,
        prefill_batched=prefill_batched,
        memory_fraction=decode_fraction,
        read="num_nodes 4 x 16; prefiller_host_index [0, 1] decoder_host_index [2, 3]; prefill: "
        "--data-parallel-size 2 --data-parallel-size-local 1 (rank 1 --headless on node 1) "
        f"--tensor-parallel-size 16 --enable-expert-parallel --max-num-seqs {prefill_seqs} "
        f"--max-num-batched-tokens {prefill_batched}; decode: --data-parallel-size 8 "
        "--data-parallel-size-local 4 (start rank 4 --headless on node 3) --tensor-parallel-size 4 "
        f"--enable-expert-parallel --max-num-seqs {decode_seqs} --max-num-batched-tokens {decode_seqs * 3} "
        f"FULL_DECODE_ONLY; deepseek_mtp 2 tokens both; --gpu-memory-utilization 0.82 / 0.90 prefill, "
        f"{decode_fraction:g} decode; kv_connector_extra_config prefill dp 2 tp 16, decode dp 8 tp 4",
    )


DSV32_MARCH = deepseek_v32(prefill_seqs=64, prefill_batched=16384, decode_seqs=4, decode_fraction=0.95)
DSV32_LATER = deepseek_v32(prefill_seqs=64, prefill_batched=32560, decode_seqs=4, decode_fraction=0.9)
DSV32_AUGUST = deepseek_v32(prefill_seqs=16, prefill_batched=8192, decode_seqs=14, decode_fraction=0.9)

CONFIG = "tests/e2e/nightly/multi_node/config/"
INTERNAL = "tests/e2e/nightly/multi_node/internal_dp/config/"
EXTERNAL = "tests/e2e/nightly/multi_node/external_dp/config/"
# (source_path, source_commit) -> the deployment read there
DEPLOYMENTS: dict[tuple[str, str], PdDeployment] = {
    (CONFIG + "Qwen3-235B-A22B-Mooncake-Layerwise.yaml", "b60b9910053f3d8a9ef7d4eea34c553f81f215a3"): (
        QWEN3_LAYERWISE_TP8
    ),
    (INTERNAL + "Qwen3-235B-A22B-Mooncake-Layerwise.yaml", "b0f260b45ae664a2479ffa3103959147cbe25be0"): (
        QWEN3_LAYERWISE_TP8
    ),
    (INTERNAL + "Qwen3-235B-A22B-Mooncake-Layerwise.yaml", "acc013619723659ff0acb8fd35ef9bc3ce47113a"): (
        QWEN3_TP4_DECODE
    ),
    (INTERNAL + "Qwen3-235B-disagg-pd.yaml", "67b1ac5e7a2f0d98606c720d500cdb3f8d675054"): QWEN3_TP4_DECODE,
    (INTERNAL + "Qwen3-235B-disagg-pd.yaml", "92616f3a64e7218655c2d009aa8ecf855091e54d"): QWEN3_TP4_DECODE,
    (CONFIG + "DeepSeek-V3_2-W8A8-EP.yaml", "566c367a1029bee02dff96afbb765a82b1b4f625"): DSV32_MARCH,
    (CONFIG + "DeepSeek-V3_2-W8A8-EP.yaml", "3effc4bc70176a4a0dc1da82fdbd72c6cc6b42b5"): DSV32_MARCH,
    (CONFIG + "DeepSeek-V3_2-W8A8-EP.yaml", "4671dc113b301541d540f42b4e9e65b738950b19"): DSV32_LATER,
    (CONFIG + "DeepSeek-V3_2-W8A8-EP.yaml", "40992df62cb70e25e379e7269125b87d9589cb8e"): DSV32_LATER,
    (INTERNAL + "DeepSeek-V3_2-W8A8-EP.yaml", "b0f260b45ae664a2479ffa3103959147cbe25be0"): DSV32_LATER,
    (INTERNAL + "DeepSeek-V3_2-W8A8-EP.yaml", "f302cf759f639b90c343a0cde9c97b66fb7a89bd"): DSV32_LATER,
    (INTERNAL + "DeepSeek-V3_2-W8A8-EP.yaml", "67b1ac5e7a2f0d98606c720d500cdb3f8d675054"): DSV32_AUGUST,
    (
        EXTERNAL + "Kimi-K2.6-W4A8-64k-1k-TPOT50-PD.yaml",
        "2cd683a396e5b8771b49b6e2ff941352458aabd7",
    ): PdDeployment(
        prefill=(1, 8, 2),
        decode=(1, 4, 4),
        decode_max_seqs=16,
        prefill_batched=8192,
        memory_fraction=0.92,
        read="num_nodes 2 x 16; routing groups prefiller [0] decoder [1]; config: node 0 dp_size 2 "
        "dp_size_local 2 tp_size 8, node 1 dp_size 4 dp_size_local 4 tp_size 4; --enable-expert-parallel; "
        "prefill --max-num-seqs 16 --max-num-batched-tokens 8192 --gpu-memory-utilization 0.94 "
        "--enforce-eager, dflash (z-lab/Kimi-K2.5-DFlash) 1 token; decode --max-num-seqs 16 "
        "--max-num-batched-tokens 256 --gpu-memory-utilization 0.92 FULL_DECODE_ONLY, dflash 15 tokens",
    ),
    (
        EXTERNAL + "Minimax_m2.7_in128k_1k_prefix90_tpot50.yaml",
        "cba211e9dcb49c63c96526e8ea98ff3b30d9f4e3",
    ): PdDeployment(
        prefill=(1, 8, 2),
        decode=(1, 8, 2),
        decode_max_seqs=24,
        prefill_batched=16384,
        memory_fraction=0.8,
        read="num_nodes 2 x 16; routing disaggregated_prefill, groups prefiller [0] decoder [1]; config: "
        "each node dp_size 2 dp_size_local 2 tp_size 8; --enable-expert-parallel; both sides --max-num-seqs "
        "24 --max-num-batched-tokens 16384 --gpu-memory-utilization 0.8, eagle3 3 tokens "
        "(Eco-Tech/MiniMax-M2.7-eagle-model-short); prefill --enforce-eager, decode FULL_DECODE_ONLY; "
        "MooncakeConnectorV1 (read at 1196a5ef, the file's newest stored version)",
    ),
    (
        EXTERNAL + "GLM-5.1-W8A8C8-128k-1k-90-50-PD.yaml",
        "d5e9816065ede613327d93908f87fee9f5c47128",
    ): PdDeployment(
        prefill=(1, 8, 4),
        decode=(1, 4, 8),
        decode_max_seqs=32,
        prefill_batched=8192,
        memory_fraction=0.92,
        read="num_nodes 4 x 16; routing groups prefiller [0, 1] decoder [2, 3]; config: nodes 0-1 dp_size 4 "
        "dp_size_local 2 tp_size 8 (one dp_address), nodes 2-3 dp_size 8 dp_size_local 4 tp_size 4; "
        "--enable-expert-parallel; prefill --max-num-seqs 64 --max-num-batched-tokens 8192; decode "
        "--max-num-seqs 32 --max-num-batched-tokens 164; deepseek_mtp 3 tokens; --enable-prefix-caching; "
        "--gpu-memory-utilization 0.92 both",
    ),
    (
        EXTERNAL + "GLM-5.2-W8A8C8-128k-1k-90-50-PD.yaml",
        "d5e9816065ede613327d93908f87fee9f5c47128",
    ): PdDeployment(
        prefill=(1, 8, 4),
        decode=(1, 4, 8),
        decode_max_seqs=32,
        prefill_batched=8192,
        memory_fraction=0.92,
        read="as GLM-5.1's file at the same commit: prefill dp 4 x tp 8 on nodes 0-1, decode dp 8 x tp 4 on "
        "nodes 2-3 (config dp_size / tp_size per node_index)",
    ),
    (EXTERNAL + "DeepSeek-V4-Pro-w4a8-1M-PD.yaml", "2cd683a396e5b8771b49b6e2ff941352458aabd7"): PdDeployment(
        prefill=(1, 16, 2),
        decode=(1, 16, 2),
        decode_max_seqs=60,
        prefill_batched=2048,
        memory_fraction=0.95,
        read="num_nodes 4 x 16; routing disaggregated_prefill, groups prefiller [0, 1] decoder [2, 3]; "
        "config: every node dp_size 2 dp_size_local 1 tp_size 16 (dp_address node 0 for nodes 0-1, node 2 "
        "for 2-3); "
        "--enable-expert-parallel; --max-model-len 1048576 both; prefill --max-num-batched-tokens 2048 "
        "--max-num-seqs 16 --gpu-memory-utilization 0.94 --enforce-eager; decode --max-num-batched-tokens 60 "
        "--max-num-seqs 60 --gpu-memory-utilization 0.95 FULL_DECODE_ONLY --no-enable-prefix-caching; mtp 1 "
        "token both; MooncakeHybridConnector, kv_connector_extra_config prefill dp 2 tp 16, decode dp 2 "
        "tp 16",
    ),
    (
        EXTERNAL + "DeepSeek-V4-Pro-w4a8-prefix-cache-PD.yaml",
        "5ef662e6bdebe35be5b3aafccfb99e1426da5536",
    ): PdDeployment(
        prefill=(1, 8, 4),
        decode=(1, 2, 16),
        decode_max_seqs=30,
        prefill_batched=4096,
        memory_fraction=0.95,
        read="num_nodes 4 x 16; routing groups prefiller [0, 1] decoder [2, 3]; config: nodes 0-1 dp_size 4 "
        "dp_size_local 2 tp_size 8, nodes 2-3 dp_size 16 dp_size_local 8 tp_size 2 (one dp_address per "
        "role); --enable-expert-parallel; --max-model-len 204800 both; prefill --max-num-batched-tokens 4096 "
        "--max-num-seqs 16 --gpu-memory-utilization 0.94 --enforce-eager, mtp 1 token; decode "
        "--max-num-batched-tokens 120 --max-num-seqs 30 --gpu-memory-utilization 0.95 FULL_DECODE_ONLY "
        "--no-enable-prefix-caching, mtp 3 tokens; kv_connector_extra_config prefill dp 4 tp 8, decode dp 16 "
        "tp 2",
    ),
    ("docs/source/tutorials/Qwen3-235B-A22B.md", "eab306b09c1fc6e5cb038c2d78192d9870cbbf58"): PdDeployment(
        prefill=(1, 8, 2),
        decode=(1, 4, 8),
        decode_max_seqs=128,
        prefill_batched=16384,
        memory_fraction=0.9,
        read="section 'Three Node A3 -- PD disaggregation': 'one node as one prefill instance and two nodes "
        "as one decode instance'; prefill --tensor-parallel-size 8 --data-parallel-size 2 "
        "--data-parallel-size-local 2 --enable-expert-parallel --max-num-seqs 24 --max-num-batched-tokens "
        "16384; decode --tensor-parallel-size 4 --data-parallel-size 8 --data-parallel-size-local 4 "
        "(start rank 4 --headless on the second node) --max-num-seqs 128 --max-num-batched-tokens 256; "
        "--gpu-memory-utilization 0.9 both; kv_connector_extra_config prefill dp 2 tp 8, decode dp 8 tp 4",
    ),
}


def deployment_of(row: dict[str, str]) -> PdDeployment | None:
    """The disaggregated deployment the row's source file states (None: not read here)."""
    return DEPLOYMENTS.get((row["source_path"], row["source_commit"]))
