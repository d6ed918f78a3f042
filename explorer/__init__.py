"""Unmask explorer: traces -> figures and Gradio layouts. Never imports torch; every view is a pure function of a
trace (plus the current step and selection), so panels render from a saved trace without a model."""
