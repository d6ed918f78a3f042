"""One view per module; each is a pure function of (trace, step, selection) -> Plotly figure or HTML."""
