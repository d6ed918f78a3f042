"""The README's result tables (``python -m tools.experiments NAME``) and the pre-baked example traces
(``python -m tools.experiments.bake_examples``). Not on a decode's path."""
