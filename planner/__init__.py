"""kvplan: capacity planning for LLM inference on Ascend NPUs (pure core: no torch, streamlit or plotly)."""

__version__ = "0.1.0"
