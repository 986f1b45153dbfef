"""The page script that `kvplan dashboard` hands to `streamlit run` (the repository's app.py is the same
page for `streamlit run app.py`)."""

from dashboard.app import main

main()
