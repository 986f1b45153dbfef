"""vLLM / vllm-ascend: the KV pool arithmetic (pool.py) and the `vllm serve` command (args.py)."""
