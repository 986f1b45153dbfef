"""vLLM / vllm-ascend: the KV pool arithmetic (pool.py), the `vllm serve` command (args.py), the engine's
start-up arithmetic per release (startup.py) and its start-up log reader (log.py)."""
