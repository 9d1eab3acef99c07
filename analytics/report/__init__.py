"""Pure chart builders (``charts``: frames in, Plotly figures out) and the HTML report (``html``).

The app draws with the same builders, so a figure in the report is the figure on the page.
"""
