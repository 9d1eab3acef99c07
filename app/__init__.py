"""app: the Streamlit + Plotly read-only UI over the analytics store (arrives with a later issue).

It may import ``analytics``'s public names, streamlit, plotly and polars; it never writes events.
"""
