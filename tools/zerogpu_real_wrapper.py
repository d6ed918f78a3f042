"""The app's leased service through the real ``spaces`` generator wrapper, here, without a Space: the platform's
scheduler (``client``) and ZeroGPU's torch emulation (which needs a CUDA build of torch) are stubbed; the fork, the
queues, the pickling and the stop event are the package's own. Prints what each entry point gave.

    pip download --no-deps spaces -d /tmp/spaces && (cd /tmp/spaces && unzip -oq spaces-*.whl)
    python -m tools.zerogpu_real_wrapper /tmp/spaces
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
import types


def stub_platform() -> None:
    import spaces.zero
    from spaces.config import Config
    Config.zero_gpu = True
    torch_emulation = types.ModuleType("spaces.zero.torch")
    torch_emulation.enter_mode = torch_emulation.unpatch = torch_emulation.init = torch_emulation.move = \
        lambda *a, **k: None
    torch_emulation.size = lambda: 0
    sys.modules["spaces.zero.torch"] = spaces.zero.torch = torch_emulation
    from spaces.zero import client
    client.schedule = lambda **kw: types.SimpleNamespace(allowToken="t", nvidiaIndex=0, nvidiaUUID="u", idle=True)
    client.release = client.allow = client.duration_warning = lambda *a, **k: None
    client.get_duration_seconds = lambda *a, **k: 60
    os.environ["SPACES_ZERO_GPU"] = "true"


def main(spaces_dir: str) -> None:
    sys.path.insert(0, spaces_dir)
    os.environ.setdefault("UNMASK_CACHE_DIR", tempfile.mkdtemp())
    stub_platform()
    import app
    from engine.decoders import parse_spec
    from engine.harness.service import DecodeService
    from engine.runtime import jobs
    from explorer.page.api import summary
    pages, build = [], app.build_demo
    app.build_demo = lambda p: (pages.append(p), build(p))[1]
    app.create_app()
    page = pages[0]
    service, model, spec = page.service, page.models[0], parse_spec("threshold:tau=0.7,block_size=8")
    prompt = page.examples[model][0][0]
    ids = lambda trace: summary(trace)["token_ids"]  # noqa: E731
    want = list(DecodeService.stream(service, prompt, *spec, model, page=True))
    rounds = jobs.engine_loop().rounds
    got = list(service.stream(prompt, *spec, model, page=True, every_s=0.0))
    print(f"{type(service).__name__}: stream {len(got)} traces, the one-process tokens: "
          f"{ids(got[-1]) == ids(want[-1])}, no round in the app's process: {jobs.engine_loop().rounds == rounds}")
    branch = {"step": 2, "force": None, "spec": "ar"}
    wb = list(DecodeService.branch_from(service, want[-1], branch, model, page=True))[-1]
    gb = list(service.branch_from(want[-1], branch, model, page=True))[-1]
    ab = list(service.branch_stream(prompt, *spec, model, '{"step": 2, "spec": "ar"}', page=True, every_s=0.5))[-1]
    print(f"branch_from, branch_stream: the one-process tokens: {ids(gb) == ids(wb)}, {ids(ab) == ids(wb)}")
    print("sweep_stream accuracy:", [r["accuracy"] for r in list(service.sweep_stream(["ar"], 3, model=model))[-1]])
    try:
        list(service.stream(" ", *spec, model, page=True))
    except Exception as e:
        print(f"a visitor's error: {type(e).__name__}: {e}")
    gen = service.stream(prompt, "threshold", {"tau": 1.0, "block_size": 32, "gen_length": 128}, model, page=True)
    next(gen)
    t0 = time.monotonic()
    gen.close()
    print(f"close mid-decode returned after the worker ended, in {time.monotonic() - t0:.2f} s")
    for child in multiprocessing.active_children():
        child.kill()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/spaces")
