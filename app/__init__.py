"""app: the Streamlit + Plotly read-only UI over the analytics store.

``main`` is the navigation; ``views/`` holds one module per page; ``context``, ``owner``,
``files``, ``widgets`` and ``tuning_job`` are what the pages share. It imports ``analytics``'s
public names, streamlit, plotly and polars only; it never writes events.
"""
