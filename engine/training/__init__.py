"""Tooling that makes the embedded models and their side files (not on a decode's path):

    python -m engine.training.train              the block-diffusion model (2L objective)
    python -m engine.training.fit_ce             CE's Kalman noise -> ce.json
    python -m engine.training.train_controller   the TSPD controller -> tspd_controller.*
``collect`` holds the trajectory collection both fitting scripts share."""
