"""Tooling that makes the embedded models and their side files (not on a decode's path):

    python -m tools.training.train              the block-diffusion model (2L objective)
    python -m tools.training.train_controller   TSPD + CE on its own trajectories -> ce.json, tspd_controller.*
``collect`` (reference decodes, rollouts, rows) and ``fit_ce`` (noise fit and coverage calibration) serve it."""
