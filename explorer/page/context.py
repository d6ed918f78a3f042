"""What every part of the page shares: the decode service, the trace cache, the example problems and traces."""

from __future__ import annotations

import html
import logging
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr

from engine.errors import UserError
from explorer.page.fair import Busy, FairGate
from explorer.page.presence import Gone
from engine.tasks import TASKS, Problem, get_task

log = logging.getLogger("unmask")


# a session's page state (runs, a sweep's rows) is let go after this long without an update
STATE_TTL_S = 20 * 60
OPENED = 256            # problems the Sweep opened whose verdicts the page keeps (held-out, not visitors' text)

def shown_error(e: Exception | str, escape: bool = True) -> gr.Error:
    """What a visitor's bad input becomes: a one-line pop-up, HTML-escaped (gradio renders pop-up text as HTML, and
    the text may be the visitor's own; ``escape=False`` for an API's caller, who reads it as text), logged at INFO
    without a traceback (it is not a bug)."""
    text = str(e)
    log.info("user error: %s", text[:200])
    return gr.Error(html.escape(text) if escape else text, print_exception=False)


def failed_panel(what: str, e: Exception | str) -> str:
    """A failed Branch or Compare said in its own panel, in one line where its result goes: the previous result
    is cleared with it (the plots emptied beside it), so no heading of the new request stands over the old one's
    figures. Not raised: gradio marks every output of a failed event with an "Error" badge over its content.
    HTML-escaped (the text may be the visitor's own), logged as ``shown_error`` does."""
    text = str(e)
    log.info("user error: %s", text[:200])
    return f"<p class='um-failed' role='alert'><b>{html.escape(what)} did not run:</b> {html.escape(text)}</p>"


def slider_number(v, name: str, lo: int, hi: int) -> int:
    """A slider's value as a crafted call may send it: a finite number (not a bool), clamped to [lo, hi]."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise UserError(f"{name} must be a number")
    return max(lo, min(hi, int(v)))


def offered_names(specs: list[str]) -> dict[str, str]:
    """A short name for each model the operator offers (a local directory's name, a hub id as it is), so the
    picker, links and exports never show the server's file layout; repeated names get -2, -3."""
    out: dict[str, str] = {}
    for spec in specs:
        local = spec.startswith(("/", ".", "~")) or Path(spec).expanduser().is_dir()
        name = Path(spec).expanduser().name if local else spec
        base, k = name, 2
        while name in out:
            name, k = f"{base}-{k}", k + 1
        out[name] = spec
    return out


JS_DIR = Path(__file__).resolve().parent.parent.parent / "assets" / "js"


def js(name: str) -> str:
    """A browser script shipped under assets/js, without its leading comment lines (gradio evaluates some of
    these scripts as one function expression)."""
    lines = (JS_DIR / name).read_text().splitlines()
    while lines and lines[0].startswith("//"):
        lines.pop(0)
    return "\n".join(lines)


@dataclass
class Page:
    service: object                                   # stream()/sweep()/model_id()
    examples: dict[str, list[tuple[str, Problem]]]    # model name -> [(prompt as shown, problem)]
    store: object = None                              # TraceStore or None
    example_traces: dict = field(default_factory=dict)  # decoder -> a pre-baked Trace shown on load
    recorded: dict = field(default_factory=dict)      # name -> a trace the operator opens (explorer.recorded)
    export_dir: object = None                         # ExportDir (explorer.export_dir) or None
    models: tuple[str, ...] = ()                      # the models a visitor may pick (the operator's list)
    model_infos: dict = field(default_factory=dict)   # name -> service.model_info()
    gate: FairGate = field(default_factory=FairGate)  # the model's fair share among visitors (explorer.page.fair)
    opened: OrderedDict = field(default_factory=OrderedDict)   # prompt -> Problem the Sweep opened (its verdict)

    @property
    def default_model(self) -> str:
        return self.models[0] if self.models else ""

    def remember(self, prob: Problem) -> None:
        """A held-out problem the Sweep opened, so its run gets the task's verdict (the last OPENED of them)."""
        self.opened[prob.prompt.strip()] = prob
        self.opened.move_to_end(prob.prompt.strip())
        while len(self.opened) > OPENED:
            self.opened.popitem(last=False)

    def problem(self, prompt: str | None) -> Problem | None:
        text = (prompt or "").strip()
        if text in self.opened:
            return self.opened[text]
        for rows in self.examples.values():
            for shown, prob in rows:
                if shown == text or prob.prompt == text:
                    return prob
        return None

    def cache_scope(self, prompt, session: str | None) -> str | None:
        """Who may be served a cached run of this prompt: everyone ("") for the page's own prompts (the held-out
        problems, the pre-baked examples), else only the session that ran it, so no visitor learns from timing
        or content that another ran a prompt of their own; None (not cached) without a session."""
        text = prompt.strip() if isinstance(prompt, str) else ""
        if self.problem(text) is not None or any(t.meta.prompt.strip() == text for t in self.example_traces.values()):
            return ""
        return session

    def verdict(self, trace) -> str | None:
        """The task checker's verdict when the trace's prompt is one of the example problems, or a problem the
        Sweep opened (GSM8K's too)."""
        prob = self.problem(trace.meta.prompt)
        opened = prob is not None and self.opened.get(trace.meta.prompt.strip()) is prob
        if prob is None or (prob.task not in TASKS and not opened):   # a chat prompt has no checker
            return None
        return get_task(prob.task).verdict(trace.meta.text, prob)

    def check_model(self, model: str | None) -> str:
        """A visitor's model choice: only the operator's list, never a path or id of the visitor's choosing."""
        if not model:
            return self.default_model
        if not isinstance(model, str) or model not in self.models:
            raise UserError(f"model {str(model)[:60]!r} is not offered here")
        return model


async def fairly(page: Page, kind: str, request, outputs):
    """The outputs of a request that runs the model, once the gate lets it (``explorer.page.fair``: by the engine
    time its flow has taken, nothing it declares); a visitor beyond its share, refused by a full queue or past its
    budget while waiting, gets the page's one-line message; one who left gets nothing more."""
    try:
        async with page.gate.slot(kind, request, tell=gr.Info):
            async for out in outputs:
                yield out
    except Busy as e:
        raise shown_error(str(e)) from None
    except Gone:
        log.info("%s abandoned: its client left", kind)
