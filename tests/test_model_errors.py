"""Corrupt or hostile model directories give one-line ModelLoadErrors; the model id follows the files' contents."""

import json
import pickle
import shutil

import pytest

from engine.errors import ModelLoadError
from engine.models.model import load_model


def _config(d, **changes):
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))


def _bin_only(d):
    (d / "model.safetensors").unlink()
    (d / "pytorch_model.bin").write_bytes(pickle.dumps({"evil": 1}))


CASES = {
    "config is a list": (lambda d: (d / "config.json").write_text("[1, 2]"), "not a JSON object"),
    "config is not JSON": (lambda d: (d / "config.json").write_text("{"), "unreadable"),
    "hidden_size is text": (lambda d: _config(d, hidden_size="abc"), "does not describe"),
    "negative layers": (lambda d: _config(d, num_hidden_layers=-3), "does not describe"),
    "unknown family": (lambda d: _config(d, model_type="mystery"), "not supported"),
    "truncated weights": (lambda d: (d / "model.safetensors").write_bytes(
        (d / "model.safetensors").read_bytes()[:1000]), "cannot load"),
    "garbage weights": (lambda d: (d / "model.safetensors").write_bytes(b"x" * 5000), "cannot load"),
    "pickled .bin only": (_bin_only, "no file named model.safetensors"),
    "broken tokenizer": (lambda d: (d / "tokenizer.json").write_text("{"), "cannot load"),
    "mask id is text": (lambda d: _config(d, mask_token_id="x"), "mask_token_id"),
    "vocab mismatch": (lambda d: _config(d, vocab_size=50), "cannot load"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_corrupt_model_directory(sdar_dir, tmp_path, case):
    d = tmp_path / "m"
    shutil.copytree(sdar_dir, d)
    mutate, message = CASES[case]
    mutate(d)
    with pytest.raises(ModelLoadError, match=message) as e:
        load_model(str(d), device="cpu")
    assert "\n" not in str(e.value)


def test_revision_hashes_contents_not_sizes(sdar_dir, tmp_path):
    d = tmp_path / "m"
    shutil.copytree(sdar_dir, d)
    before = load_model(str(d), device="cpu").info["revision"]
    w = bytearray((d / "model.safetensors").read_bytes())
    w[-1] ^= 0x01                                     # same size, different weights
    (d / "model.safetensors").write_bytes(bytes(w))
    after = load_model(str(d), device="cpu").info["revision"]
    (d / "ce.json").write_text('{"params": {"q_level": 0.5, "q_vel": 0.1, "r": 0.2}}')   # a side file
    with_side = load_model(str(d), device="cpu").info["revision"]
    assert len({before, after, with_side}) == 3
