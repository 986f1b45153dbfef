"""Hugging Face transformers: tensor parallelism only, unfused kernels (pool.py)."""
