"""Visitors' prompts stay private: the trace cache is shared for the page's own prompts only, and a free-text
prompt's run is served from the cache to the session that ran it, never to another (no timing or content tells B
that A ran it). A shared link still reproduces its run: it decodes again, deterministically."""

from engine.harness.service import DecodeService
from engine.tasks import get_task
from explorer.export_dir import ExportDir
from explorer.page.context import Page
from explorer.store import TraceStore
from tests.test_soak import final, page_run

FREE = "Ann has 7 red pens and 2 blue pens . How many pens ?"


def counting_page(tmp_path, examples=None):
    service = DecodeService(default_model="tiny", max_seconds=30)
    calls = []
    real = service.stream
    service.stream = lambda *a, **k: calls.append(a[0]) or real(*a, **k)
    page = Page(service, examples or {}, store=TraceStore(str(tmp_path / "traces")),
                export_dir=ExportDir(str(tmp_path)), models=("tiny",))
    return page, calls


def test_a_free_text_prompt_is_cached_for_its_session_only(tmp_path):
    from engine.records.trace import Trace
    page, calls = counting_page(tmp_path)
    a1 = final(page_run(page, "A", FREE, decoder="threshold", block_size=4, gen_length=16)(), Trace)
    a2 = final(page_run(page, "A", FREE, decoder="threshold", block_size=4, gen_length=16)(), Trace)
    assert len(calls) == 1                            # A's second Run is a cache hit
    b = final(page_run(page, "B", FREE, decoder="threshold", block_size=4, gen_length=16)(), Trace)
    assert len(calls) == 2                            # B decodes again: A's run is not served to B
    assert a1.meta.token_ids == a2.meta.token_ids == b.meta.token_ids   # deterministic: the same answer


def test_the_pages_own_prompts_are_shared(tmp_path):
    from engine.records.trace import Trace
    prob = get_task("arith").problems("test", 1)[0]
    page, calls = counting_page(tmp_path, {"tiny": [(prob.prompt, prob)]})
    for session in ("A", "B"):
        final(page_run(page, session, prob.prompt, decoder="threshold", block_size=4, gen_length=16)(), Trace)
    assert len(calls) == 1                            # a held-out problem: B is served A's run
    assert page.cache_scope(prob.prompt, "B") == "" and page.cache_scope(FREE, "B") == "B"
    assert page.cache_scope(FREE, None) is None       # no session: not cached at all
