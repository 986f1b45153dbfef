"""kvplan dashboard: `streamlit run app.py`. The page lives in the dashboard/ package (app, sections, figures,
view-model); `streamlit run` puts this file's folder on sys.path, so `dashboard` imports from here."""

from dashboard.app import main

main()
