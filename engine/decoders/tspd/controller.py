"""[PROPOSED] TSPD controller: is a masked position's current candidate already its final token?

``MLPController``: 14 -> 32 -> 32 -> 1 (ReLU, sigmoid), trained by ``python -m tools.training.train_controller`` on
the trajectories TSPD itself sees (parallel decoding, DAgger), labelled by a conservative reference decode;
shipped as safetensors + a JSON card holding the operating threshold chosen for a per-answer error budget on a
validation split.
``heuristic_fix``: the training-free rule c >= τ0 − α·π with a stable, non-falling candidate, or c >= τ0.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from engine.decoders.tspd.features import FEATURES, F

CONTROLLER_FILE = "tspd_controller.safetensors"
CARD_FILE = "tspd_controller.json"


class MLP(torch.nn.Module):
    def __init__(self, d_in: int = len(FEATURES), hidden: int = 32):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))

    def forward(self, x):  # (n, 14) -> (n,) logits
        return self.net(x)[:, 0]


class MLPController:
    def __init__(self, mlp: MLP, threshold: float, card: dict):
        self.mlp, self.threshold, self.card = mlp.eval(), threshold, card

    @torch.no_grad()
    def score(self, feats: np.ndarray) -> np.ndarray:
        return torch.sigmoid(self.mlp(torch.from_numpy(np.asarray(feats, np.float32)))).numpy()

    def save(self, directory: Path) -> None:
        save_file({k: v.contiguous() for k, v in self.mlp.state_dict().items()}, str(directory / CONTROLLER_FILE))
        (directory / CARD_FILE).write_text(json.dumps(dict(self.card, threshold=self.threshold), indent=2))

    @classmethod
    def load(cls, directory: Path) -> "MLPController":
        card = json.loads((directory / CARD_FILE).read_text())
        mlp = MLP()
        mlp.load_state_dict(load_file(str(directory / CONTROLLER_FILE)))
        return cls(mlp, float(card["threshold"]), card)


def heuristic_fix(feats: np.ndarray, tau0: float = 0.9, alpha: float = 0.1, s_min: int = 2, k: int = 4) -> np.ndarray:
    """Training-free TSPD rule on the feature matrix (L, 14)."""
    c, slope = feats[:, F["confidence"]], feats[:, F["conf_momentum"]]
    stab, prog = feats[:, F["stability"]] * k, feats[:, F["left_progress"]]
    return (c >= tau0) | ((c >= tau0 - alpha * prog) & (stab >= s_min) & (slope >= 0))
