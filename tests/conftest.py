"""Fixtures: tiny random checkpoints written in each family's on-disk format, loaded through the real loader."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import Qwen3ForCausalLM

from engine.tasks import get_task
from engine.models.tokenizer import build_tokenizer
from tools.training.train import model_config

torch.set_num_threads(1)  # CI has 2 cores; oversubscribed threads make tiny models crawl


def write_sdar_checkpoint(path, layers: int = 2, hidden: int = 64, seed: int = 0):
    """A random Qwen3-weight model saved as SDAR format: model_type "sdar", mask_token_id and block_size keys."""
    tok = build_tokenizer(get_task("arith").vocabulary())
    torch.manual_seed(seed)
    special = dict(pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = Qwen3ForCausalLM(model_config(len(tok), layers, hidden, special))
    with torch.no_grad():  # sharpen the random logits so decoders see a spread of confidences
        model.lm_head.weight.mul_(8.0)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    cfg = json.loads((path / "config.json").read_text())
    cfg.update(model_type="sdar", architectures=["SDARForCausalLM"], mask_token_id=tok.mask_token_id, block_size=4,
               auto_map={"AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM"},
               unmask={"task": "arith"})
    (path / "config.json").write_text(json.dumps(cfg))
    return path


@pytest.fixture(scope="session")
def sdar_dir(tmp_path_factory):
    return write_sdar_checkpoint(tmp_path_factory.mktemp("sdar"))


@pytest.fixture(scope="session")
def adapter(sdar_dir):
    from engine.models.model import load_model
    return load_model(str(sdar_dir), device="cpu")


@pytest.fixture(scope="session")
def arith():
    return get_task("arith")


class ScriptedAdapter:
    """A stand-in model: block logits follow a script of (candidate, confidence) per position per call."""

    mask_token_id, stop_ids, name, model_type, path = 3, (2,), "scripted", "scripted", None
    vocab_size, attention, logit_shift, device, dtype = 50, "block_causal", 0, "cpu", "float32"

    class model:
        class config:
            max_position_embeddings = 1024

    def __init__(self, script):
        self.script, self.calls = script, 0

    def new_cache(self):
        raise AssertionError("the scripted adapter runs without cache")

    def offers(self):
        return frozenset({"block_causal", "mask_slots", "no_shift"})

    def encode_prompt(self, text):
        return [1, 10, 11, 12]

    def decode(self, ids):
        return " ".join(map(str, ids))

    def unknown_words(self, text, ids=None):
        return []

    def token_strings(self, ids):
        return [str(i) for i in ids]

    def forward(self, ids, mask, pos, cache=None):
        rows = []
        for cand, c in self.script(self.calls):
            row = torch.full((self.vocab_size,), float(np.log((1 - c) / (self.vocab_size - 1))))
            row[cand] = float(np.log(c))
            rows.append(row)
        self.calls += 1
        block = torch.stack(rows)
        return torch.cat([torch.zeros(len(ids) - len(block), self.vocab_size), block])


ROOT = Path(__file__).resolve().parent.parent


from tools.local_app import free_port, running_app  # noqa: E402,F401  (the tests' app fixture)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The real app on a loopback port with its default settings, one per test worker, shared by every browser
    test module that worker runs: each test opens its own page (a fresh session). A fork of the worker's fork
    server (``tools.app_forkserver``, which the worker's other app starts use too): about half a fresh start's 12
    CPU-seconds. A test that needs other settings or a fresh process starts its own (``running_app``)."""
    with running_app(tmp_path_factory.mktemp("app"), forked=True) as (url, _):      # the app's default settings
        yield url


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium through Playwright (the browser test modules skip themselves where either is missing)."""
    from playwright.sync_api import sync_playwright

    from tools.page.bench_ux import launch
    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


# ms between two checks of a page's waited condition. Playwright's default ("raf") checks it at every animation
# frame, which keeps an otherwise idle page drawing 60 frames a second for as long as a test waits: about 0.2 CPU-s
# a second of Chromium on this project's 2-core machines (1.7 CPU-s over 8 s against a 100 ms poll's ~0), taken
# from the app and the other test worker. A wait that must catch a state lasting less than this asks for "raf".
POLL_MS = 100


def _poll_at_intervals():
    """Every page's ``wait_for_function`` without a ``polling`` of its own checks every ``POLL_MS`` ms."""
    import functools
    try:
        from playwright.sync_api import Frame, Page
    except ImportError:                              # no Playwright: the browser modules skip themselves
        return
    for cls in (Page, Frame):
        def patient(self, expression, *, arg=None, polling=None, timeout=None, _wait=cls.wait_for_function):
            return _wait(self, expression, arg=arg, polling=POLL_MS if polling is None else polling, timeout=timeout)
        cls.wait_for_function = functools.wraps(cls.wait_for_function)(patient)


_poll_at_intervals()


SEEDS = itertools.count(1)


@pytest.fixture
def fresh_seed():
    """A seed no earlier test of this worker put in a link. The page's cache serves an example's finished run whole
    to every later visitor: a test that must see a run stream asks for its own seed (a greedy decode gives the same
    run), or its rerun after a timeout would be served the first attempt's run (CI's red run: no streaming seen)."""
    return next(SEEDS)


@pytest.fixture
def pages(browser, request):
    """New pages for one test (``pages(width, height)``), closed after it; a page is screenshot under artifacts/
    only when the test failed (as it failed, for diagnosis: a passing page's screenshot costs up to a second), and
    its script errors and console errors are printed then (in the failure's report: a page that never shows its run
    may have thrown)."""
    opened, said = [], []

    def new(width: int = 1400, height: int = 1400, **options):      # options: Playwright's (color_scheme, ...)
        pg = browser.new_page(viewport={"width": width, "height": height}, **options)
        i = len(opened)
        pg.on("pageerror", lambda e: said.append(f"page {i} threw: {e}"))
        pg.on("console", lambda m: m.type == "error" and said.append(f"page {i} console: {m.text[:300]}"))
        opened.append(pg)
        return pg
    yield new
    rep = getattr(request.node, "rep_call", None)
    failed = rep is None or rep.failed
    if failed and said:
        print("\n".join(["the pages' script and console errors:", *said[-30:]]))
    for i, pg in enumerate(opened):
        if failed:
            (ROOT / "artifacts").mkdir(exist_ok=True)
            name = request.node.name + (f"-{i}" if i else "")
            pg.screenshot(path=str(ROOT / "artifacts" / f"{name}.png"), full_page=True)
        pg.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on its test item (``item.rep_call``): a browser fixture screenshots only a failed page."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


# a browser test whose page waited past its timeout runs once more (pytest-rerunfailures: "R" in the progress line,
# "N rerun" in the summary, the first attempt's traceback under "rerun test summary info": pyproject's addopts). On
# two loaded cores a page sometimes never shows a run (seen about once in three full runs, each time a different
# test; the screenshot of the last, test_browser.py's scrubbing test: "Running..." and an empty text view 60 s after
# its link's page opened): a hang kept visible in the output, not a red CI for a suite whose every other check
# passed. Any other failure fails at once.
RERUN_BROWSER = dict(reruns=1, only_rerun=["TimeoutError"])


# the modules that start a browser, an app or many clients run first: pytest-xdist hands each worker a whole module
# at a time (``--dist loadfile``, in this order: pyproject's ``--no-loadscope-reorder``), so the run ends on short
# in-process modules with both cores busy; its own order (most tests first) left single-test modules such as the
# GSM8K sweep's page (50 s) for the end, one core idle 35 s while the other finished it
HEAVY = ("browser", "load", "ray")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(pytest.mark.flaky(**RERUN_BROWSER))
    items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in HEAVY))      # stable: files stay whole


@pytest.fixture(autouse=True)
def _engine_loop_limits():
    """The process loop's limits as each test found them: a CLI run in this process (``bench --batch 1``) sets
    its running set, which would otherwise change how later tests' decodes share rounds."""
    from engine.runtime import jobs
    before = (jobs._LOOP.max_running, jobs._LOOP.round_tokens) if jobs._LOOP is not None else None
    yield
    if jobs._LOOP is not None:                              # started during the test: its defaults
        jobs.configure(*(before or jobs.default_limits()))


@pytest.fixture(autouse=True)
def _outside_any_request():
    """Each test starts outside any request: a page handler a test drove in this thread (``presence.watch``) leaves
    no arrival time or presence test behind for the next test's handlers, which would count a stale budget."""
    from explorer.page import presence
    arrived, present = presence.ARRIVED.set(None), presence.PRESENT.set(lambda: True)
    yield
    presence.ARRIVED.reset(arrived)
    presence.PRESENT.reset(present)


def _say_host_speed(config, when: str) -> None:
    """The host's speed at the run's start or end, beside the run's time: a shared 2-core host runs this suite
    about 1.5× slower on some days than on others (``tools.provenance.loop_ms``). Said by the controller only (a
    test worker's lines are not shown, so it neither measures nor says), and under ``-q`` too."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or hasattr(config, "workerinput"):
        return
    from tools import provenance
    ms = provenance.LOOP_MS_AT_START if when == "start" else provenance.loop_ms()     # measured at its import
    reporter.write_line(f"host: reference loop {ms} ms at the {when} (tools/provenance.py's loop_ms)")


def pytest_sessionstart(session):
    _say_host_speed(session.config, "start")


def pytest_terminal_summary(terminalreporter, config):
    _say_host_speed(config, "end")
