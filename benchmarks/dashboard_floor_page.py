"""The floor for benchmarks/bench_dashboard.py --floor: the least Streamlit page that passes its waits (one
metric, one HTML element of the Memory bar's class), so the dashboard's first page can be told apart from
what any Streamlit page costs in the same browser on the same machine."""

import streamlit as st

st.metric("floor", "1")
st.html('<div class="kvplan-membar">floor</div>')
