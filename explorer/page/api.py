"""The documented API: ``decode(prompt, spec, model="", branch="")`` with the page's validation and limits, for
``gradio_client``. It is the only endpoint the API listing shows; the page's own handlers are left out of it.

    from gradio_client import Client
    out = Client("http://localhost:7860/").predict("Ann has 3 apples. She buys 5 more. How many?",
                                                   "threshold:tau=0.9,block_size=8", api_name="/decode")

It streams: ``Client.submit`` sees a partial summary about twice a second; ``predict`` returns the last, complete
one. A cancelled call (``job.cancel()``) or a client that goes away (it closed its stream, or never opened one:
``explorer.page.presence``) stops the decode between forwards, and its place is freed only once the decode has
stopped.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import gradio as gr
from gradio.context import get_blocks_context
from gradio.utils import get_function_description

from engine.errors import UserError
from engine.catalogue.spec import parse_spec
from explorer.page import fair, presence
from explorer.page.context import Page
from explorer.page.fair import Busy
from explorer.page.presence import Gone
from explorer.page.worker import follow

PARAMETERS = ("prompt", "spec", "model", "branch")
SUMMARY_KEYS = ("text", "token_ids", "nfe", "decoder", "params", "generated_tokens", "model")


def summary(trace) -> dict:
    """The JSON summary of a trace the API returns (and the load test compares with the engine's own)."""
    out = {k: getattr(trace.meta, k) for k in SUMMARY_KEYS}
    out["limit"] = trace.meta.limit
    out["wall_s"] = trace.meta.wall_s
    out["forward_path"] = dict(trace.meta.forward_path)       # how its forwards ran (eager, static, compiled, graph)
    if trace.meta.branch is not None:
        out["branch"] = trace.meta.branch
    return out


def timing(trace, arrived: float | None, placed: float) -> dict:
    """Where a call's time went, in seconds from its arrival at the fair gate: ``gate_s`` when it took its place,
    ``answer_s`` now (this summary), ``engine_s`` its share of the engine rounds it ran in and ``shared`` the
    decodes per round (None until it ends); the rest of ``answer_s - gate_s`` it waited in the engine loop for a
    seat or sat rounds out. What a client measures beyond ``answer_s`` is HTTP and gradio's queue."""
    t0 = arrived or placed
    return {"gate_s": round(placed - t0, 4), "answer_s": round(time.monotonic() - t0, 4),
            "engine_s": trace.meta.engine_s, "shared": trace.meta.shared}


def never_ran(f, since: float, budget_s: float | None) -> None:
    """``Busy`` with one line when the request's budget passed before its decode made its first forward (past the
    fair gate, it waited in the engine loop for a seat): an empty answer would say nothing."""
    if f.value is None and f.limit:
        raise Busy(fair.WAITED.format(s=time.monotonic() - since, b=budget_s or 0))


def register_api(page: Page) -> None:
    async def decode(prompt: str, spec: str, model: str = "", branch: str = "",
                     request: gr.Request = None) -> AsyncIterator[dict]:
        """Decode a prompt with a decoder SPEC on one of the models this server offers, streaming a partial
        summary about twice a second; the last one is the finished decode.

        Parameters:
            prompt: the text to answer (at most the page's prompt length)
            spec: the decoder and its settings in the CLI's SPEC syntax, e.g. "threshold:tau=0.9,block_size=8"
            model: a model this server offers (the page's model menu); empty: its first
            branch: optional JSON {"step": s, "force": [position, token id], "spec": SPEC}: after step s

        Returns:
            a dict: text, token_ids, nfe, decoder, params, generated_tokens, model, wall_s (engine seconds),
            limit (the request limit that stopped it early, if any), timing (where its time went: gate_s,
            answer_s, engine_s, shared) and, for a branch, branch (its base and step)

        A branch decodes the run again, then branches it after its step (the forced token, another decoder); the
        summary is the branch's. Each parameter's line above is what the API page and the clients' listing show.
        """
        try:
            name, params = parse_spec(spec)
            chosen = page.check_model(model)
            page.service.check_prompt(prompt)          # cheap checks before the request waits for the model
            if branch:
                page.service.check_branch(branch, name, params, page=True)
            run = page.service.branch_stream if branch else page.service.stream
            extra = (branch,) if branch else ()
            # a script reads partials twice a second: a decode that ends sooner sends only its answer
            kw = dict(page=True, every_s=0.5, **({} if branch else {"first_at_once": False}))
            # the client is read inside the gate's slot, which names it (read before, it was "" for every call,
            # so the engine loop saw every API call as one client)
            produce = lambda should_stop: run(prompt, name, params, chosen, *extra,  # noqa: E731
                                              should_stop=should_stop, client=fair.client(), **kw)
            async with page.gate.slot("decode", request, tell=gr.Info):
                arrived, placed = presence.arrived(), time.monotonic()
                async for f in follow(produce, page.service.max_seconds, interval=0.5):
                    never_ran(f, arrived or placed, page.service.max_seconds)
                    if f.value is None:
                        continue
                    if f.limit:
                        f.value.meta.limit = f.limit
                    yield {**summary(f.value), "timing": timing(f.value, arrived, placed)}
        except (UserError, Busy) as e:
            raise gr.Error(str(e), print_exception=False) from None   # a client reads it as text: not escaped
        except Gone:
            return                                                     # its client left: nobody to answer

    dep = gr.api(decode, api_name="decode", concurrency_id="model", concurrency_limit=fair.CAPACITY)
    # gradio labels gr.api's arguments "1st", "2nd", ... and describes none: the API page and the clients' listing
    # show each one's name and its line of the docstring instead
    blocks, described = get_blocks_context().blocks, get_function_description(decode)[1]
    for block_id, name in zip(dep["inputs"], PARAMETERS):
        blocks[block_id].label = name
        blocks[block_id]._api_info = {**blocks[block_id].api_info(), "additional_description": described[name]}
