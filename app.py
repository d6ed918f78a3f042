"""Unmask: an interactive explorer for fast decoding of diffusion language models.

    python app.py            # http://localhost:7860, the embedded models
    python app.py --trace run.npz     # also a recorded trace (python -m engine record, docs/record.md), opened on load
Honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT and the operator settings of ``engine.settings`` (UNMASK_MODELS,
UNMASK_MAX_SECONDS, UNMASK_MAX_RUNNING, ...; docs/security.md lists them all), each checked before the server
starts: a bad value stops it with one line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import MappingProxyType

from engine import settings


def traces_named(argv: list[str]) -> list[str]:
    """The recorded traces the operator opens: ``--trace PATH`` (repeatable; a file or a folder) and
    ``UNMASK_TRACES`` (commas). Anything else on the command line stops the start with one line."""
    named = [t.strip() for t in settings.get("UNMASK_TRACES").split(",") if t.strip()]
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag != "--trace" or not args:
            raise settings.SettingError(f"unknown argument {flag[:40]!r} (app.py takes --trace PATH)")
        named.append(args.pop(0))
    return named


if __name__ == "__main__":
    # before gradio and torch load (seconds): a bad setting or a busy port stops the start at once, in one line
    from explorer.page import startup
    try:
        settings.check_all()
        TRACES = traces_named(sys.argv[1:])
        startup.check_port(*startup.address())
    except settings.SettingError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def own_temp_dir() -> str:
    """gradio's temporary folder made the app's own (``GRADIO_TEMP_DIR``, unless the operator set it): gradio's
    default is one folder for every gradio app on the host, and it serves the files in it. Set before gradio is
    imported (it reads the variable then); 0700 in the app's cache folder."""
    base = Path(settings.get("UNMASK_CACHE_DIR") or Path.home() / ".cache" / "unmask") / "gradio"
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o700)
    return str(base)


os.environ.setdefault("GRADIO_TEMP_DIR", own_temp_dir())

from engine.errors import UserError  # noqa: E402  (the imports below load gradio: GRADIO_TEMP_DIR first)
from engine.models.model import DEFAULT_MODEL, embedded_models  # noqa: E402
from engine.records.frozen import frozen_value  # noqa: E402
from engine.harness.service import DecodeService, budget_from_env  # noqa: E402
from engine.harness.zerogpu import leased  # noqa: E402
from engine.runtime.lifecycle import stop_all  # noqa: E402
from engine.tasks import TASKS  # noqa: E402
from explorer.export_dir import ExportDir  # noqa: E402
from explorer.layout import build_demo, launch_kwargs  # noqa: E402
from explorer.page.context import Page, offered_names  # noqa: E402
from explorer.page.examples import held_out, load_examples, shared  # noqa: E402
from explorer.page.fair import FairGate  # noqa: E402
from explorer.page import proxy  # noqa: E402
from explorer.page.presence import STREAMS  # noqa: E402
from explorer.recorded import load_recorded  # noqa: E402
from explorer.store import TraceStore  # noqa: E402

TASKS_MODEL = "unmask-tasks-small"

try:  # on Hugging Face ZeroGPU Spaces the decode runs inside a GPU lease; elsewhere this is a no-op
    import spaces
    gpu = spaces.GPU(duration=int(budget_from_env()) + 30)   # the lease outlasts the request budget
except ImportError:
    def gpu(fn):
        return fn


def on_zerogpu() -> bool:
    """A ZeroGPU Space (``spaces`` reads the same variable, the same way)."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def chat_examples() -> list:
    """A few chat prompts for instruct checkpoints (no checker: they are open questions)."""
    from engine.tasks import Problem
    texts = ["Explain in two sentences why the sky is blue.", "Write a haiku about diffusion models.",
             "What is 17 * 23? Show your steps.", "List three uses of a paperclip."]
    return [(t, Problem(t, "", None, task="chat")) for t in texts]


if on_zerogpu():
    # every entry point that runs a model (Run, Compare, Branch, Sweep, the decode API) in a worker forked per GPU
    # lease (engine.harness.zerogpu; docs/deploy.md); a CUDA graph or a compile made in one lease does not outlive it
    os.environ.setdefault("UNMASK_CUDA_GRAPHS", "0")
    os.environ.setdefault("UNMASK_COMPILE", "off")
    GPUService = leased(gpu)
else:
    GPUService = DecodeService


def create_app(traces: list[str] | None = None):
    extra = [m.strip() for m in settings.get("UNMASK_MODELS").split(",") if m.strip()]
    embedded = embedded_models()
    first = TASKS_MODEL if TASKS_MODEL in embedded else DEFAULT_MODEL      # the model with uncertain tasks
    names = offered_names(list(dict.fromkeys([first, *embedded, *extra])))   # short name -> path or id
    models = tuple(names)
    threads = settings.get("UNMASK_THREADS") or None     # torch's intra-op threads (default: torch's)
    service = GPUService(default_model=models[0], aliases=names, threads=threads)
    infos = {name: service.model_info(name) for name in models}   # loads each: no visitor waits for a load
    examples = {name: held_out(i["task"]) if i["task"] in TASKS else chat_examples() for name, i in infos.items()}
    cache_dir = Path(settings.get("UNMASK_CACHE_DIR") or Path.home() / ".cache" / "unmask")
    store = TraceStore(str(cache_dir / "traces"))
    # what every session is shown is one object each: frozen, so a change raises instead of reaching every visitor
    recorded = load_recorded(traces if traces is not None else traces_named([]))
    page = Page(service, frozen_value(examples), store=store, example_traces=load_examples(), export_dir=ExportDir(),
                models=models, model_infos=frozen_value(infos),
                gate=FairGate(concurrent=service.max_running, streams=STREAMS, ledger=service.ledger),
                recorded=MappingProxyType({name: shared(t) for name, t in recorded.items()}))
    return build_demo(page)


if __name__ == "__main__":
    print(startup.settings_line(), flush=True)
    # X-Forwarded-For only from the proxies the operator names (uvicorn reads this when it starts; its own
    # default trusts loopback, where a local client could forge any address); on a Space without named proxies
    # the app's own middleware reads the platform's header (explorer.page.proxy)
    os.environ["FORWARDED_ALLOW_IPS"] = proxy.forwarded_allow_ips()
    try:
        demo = create_app(TRACES)
    except UserError as e:       # a model the operator named cannot be loaded (a bad path, a link out, a hub id)
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    startup.settle_heap()         # no collection walks the start-up heap again: the event loop never stalls on it
    # no allowed_paths: gradio serves only the files a handler returned (copied into its own cache)
    demo.queue(default_concurrency_limit=4, max_size=settings.get("UNMASK_QUEUE"))
    startup.quiet_queue(demo._queue)    # gradio polls for work every 1 ms while idle (explorer.page.startup)
    demo.launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")), **launch_kwargs())
    # launch returns once the server has closed (Ctrl-C): the engine thread ends at its round boundary and the
    # output is written before the interpreter exits (engine.runtime.lifecycle; ``atexit`` does it on any other exit)
    stop_all()
    sys.stdout.flush()
