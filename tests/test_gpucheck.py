"""The GPU check runs end to end at toy width on CPU and reports every figure it promises."""

import json


def test_gpucheck_tiny(capsys):
    from tools.gpu.eager import main
    main(["--tiny", "--gen", "8", "--device", "cpu"])
    out = json.loads(capsys.readouterr().out)
    m = out["models"]["tiny"]
    specs = [r["spec"] for r in m["decoders"]]
    assert specs[0] == "ar" and len(specs) == 5 and any(s.startswith("s2d2") for s in specs)
    assert all(r["tokens"] == 8 and r["tokens_per_s"] > 0 and "draft" in r["forward_ms"] for r in m["decoders"])
    assert any("verify" in r["forward_ms"] for r in m["decoders"])
    assert m["argmax_agreement"]["cached_vs_uncached"] == 1.0       # fp32: the block cache is exact


def test_gpucheck_benches_gsm8k_on_a_checkpoint_given_by_path(capsys, sdar_dir):
    from tools.gpu.eager import main
    main(["--tiny", "--gen", "8", "--device", "cpu", "--checkpoint", str(sdar_dir), "--gsm8k-n", "2",
          "--gsm8k-gen", "16"])
    rows = json.loads(capsys.readouterr().out)["gsm8k"]
    assert [r["spec"].split(":")[0] for r in rows] == ["threshold", "s2d2"]       # SDAR: both apply
    assert all(r["n"] == 2 and "accuracy_ci95" in r and r["tpf"] > 0 for r in rows)
