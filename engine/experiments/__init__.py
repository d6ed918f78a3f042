"""The README's result tables (``python -m engine.experiments NAME``) and the pre-baked example traces
(``python -m engine.experiments.bake_examples``). Not on a decode's path."""
