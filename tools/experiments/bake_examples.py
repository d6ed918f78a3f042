"""Pre-bake one example trace per decoder into assets/examples/ (shown the moment the app opens, and by the tour).

    python -m tools.experiments.bake_examples [--model unmask-tasks-small]

Each decoder's example is on its card (``Example``: setting, task, model, what it must show), decoded on the
held-out problems of its task that the page offers (``offered``: so a link to it gets the checker's verdict).
threshold (the page's opening run) decodes the app's first held-out story at T = 1, τ 1 and B 8, right, with a τ
preview that marks cells at many steps when the dial is lowered (``previews``); llada and ar the first arithmetic problem. The others
are chosen to show their mechanism at work:
s2d2 and simsd a sampled story in which the verifier rejects a draft and resamples it (something goes wrong and
is fixed: the tour walks through it), tspd a decode in which the Kalman look-ahead commits a token early, edit a
sampled story whose answer the edits turned from wrong to right (the checker says so), wino and remdm a story in
which a written token goes back to [MASK], eb a story; uniform, on the uniform-noise model, an arithmetic problem whose
noise turns into the right answer; s2d2_picks, S2D2 at τ 0.3 and B 16 on picks, where the verifier rejects
parallel drafts and the answer comes out right; parallel_copy and parallel_shuffle, on unmask-parallel-small, the
same names copied and shuffled by the same threshold rule (``bake_parallel``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from explorer.page.tour import rejecting
from engine.harness.bench import revision_counts
from engine.catalogue.cards import cards
from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.models.model import load_model
from engine.tasks import get_task
from engine.records.trace import Reason
from explorer.page.examples import held_out
from explorer.scrub import payload, would_pass_tau

OUT = Path(__file__).resolve().parents[2] / "assets" / "examples"
EXAMPLES = {n: c.example for n, c in cards().items() if c.example}     # each decoder's own, on its card
# further examples of one decoder in another setting: name -> (decoder, settings, task); the tour shows them
EXTRA = {"s2d2_picks": ("s2d2", dict(block_size=16, tau=0.3, steps=4, router="always", gamma=2.0, temperature=1.0),
                        "picks")}


def turned_right(trace, adapter, prob) -> bool:
    task = get_task(prob.task)
    return revision_counts(adapter, task, prob, trace, task.verdict(trace.meta.text, prob) == "valid")[
        "turned_right"] == 1


# what a card's example may ask its decode to show (``Example.shows``): trace, adapter, problem -> bool
SHOWS = {
    "": lambda tr, adapter, prob: True,
    "rejects": lambda tr, adapter, prob: bool(rejecting(tr)),
    "revises": lambda tr, adapter, prob: any(r.revision.revised is not None for r in tr.records),
    "lookahead": lambda tr, adapter, prob: any((r.reason == Reason.CE_LOOKAHEAD).any() for r in tr.records),
    "right": lambda tr, adapter, prob: get_task(prob.task).verdict(tr.meta.text, prob) == "valid",
    "turned_right": turned_right,
    "previews": lambda tr, adapter, prob: previews(tr) and SHOWS["right"](tr, adapter, prob),
}


def previews(trace, to: float = 0.85, cells: int = 20, steps: int = 10) -> bool:
    """The opening run's rule: dragging τ from the run's own value to ``to`` marks at least ``cells`` more cells of
    the confidence map, at ``steps`` or more of its forwards (the page's τ preview, ``explorer.scrub``)."""
    d = payload(trace)
    more = set(would_pass_tau(d, to)) - set(would_pass_tau(d, trace.meta.params["tau"]))
    return len(more) >= cells and len({s for s, _ in more}) >= steps


def offered(adapter, task: str) -> list:
    """The held-out problems of ``task`` that the page offers for the model (``explorer.page.examples.held_out``):
    an example's prompt is one of them, so its run, and a link to it, gets the checker's verdict."""
    return [p for _, p in held_out(adapter.info.get("task") or task) if p.task == task]


def bake(adapter, name: str, params: dict, problems: list, want, seeds: int = 12):
    """The first (seed, problem) whose decode shows the mechanism (``want(trace, problem)``); the first problem if
    none does."""
    for seed in range(seeds):
        for prob in problems:
            tr = Generation(adapter, prob.typed, build_decoder(name, gen_length=64, seed=seed, **params)).run()
            if want(tr, prob):
                return tr
    print(f"WARNING: no decode of {name} shows what its example is for; the first problem is kept")
    return Generation(adapter, problems[0].typed, build_decoder(name, gen_length=64, **params)).run()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="unmask-tasks-small")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--only", default="", help="comma-separated decoders to bake (default: all)")
    args = ap.parse_args(argv)
    models = {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) - {""}
    for name, ex in EXAMPLES.items():
        if only and name not in only:
            continue
        key = ex.model or args.model
        if key not in models:
            models[key] = load_model(key)
        adapter, shows = models[key], SHOWS[ex.shows]
        tr = bake(adapter, name, ex.setting, offered(adapter, ex.task)[:ex.problems],
                  lambda tr, prob: shows(tr, adapter, prob))
        tr.save(out / f"{name}.npz")
        print(f"{name}: {tr.meta.prompt!r} -> {tr.meta.text!r} NFE {tr.nfe} seed {tr.meta.seed}")
    for name, (decoder, params, task) in EXTRA.items():
        if only and name not in only:
            continue
        if args.model not in models:
            models[args.model] = load_model(args.model)
        tr = bake(models[args.model], decoder, params, offered(models[args.model], task), repaired)
        tr.save(out / f"{name}.npz")
        print(f"{name}: {tr.meta.prompt!r} -> {tr.meta.text!r} NFE {tr.nfe} seed {tr.meta.seed}")
    if not only or "branch_edit" in only:
        bake_branch(models.get(args.model) or load_model(args.model), out)
    if not only or "parallel" in only:
        bake_parallel(load_model(PARALLEL_MODEL), out)


def bake_branch(adapter, out: Path) -> None:
    """The tour's what-if (assets/examples/branch_edit.npz): the opening story rewound to its middle step, the
    first masked slot forced to its least likely candidate, and token editing decoding on from there."""
    from engine.runtime.branch import Branch, canvas_after, resume_of
    from engine.records.trace import Trace
    base = Trace.load(out / "threshold.npz")
    m, s = base.meta, len(base.records) // 2
    pos = canvas_after(base, s).index(m.mask_token_id)
    rec = base.records[s]
    tok = int(rec.topk.topk_ids[pos - int(rec.positions[0])][-1])
    params = {k: v for k, v in m.params.items() if k in ("block_size", "gen_length", "temperature", "seed", "tau")}
    spec = "edit:" + ",".join(f"{k}={v}" for k, v in params.items())
    tr = Generation(adapter, m.prompt, build_decoder("edit", **params),
                    resume=resume_of(base, Branch(s, (pos, tok)), spec, adapter.vocab_size)).run()
    tr.save(out / "branch_edit.npz")
    print(f"branch_edit: after step {s}, {base.token_str(tok)!r} at {pos} -> {tr.meta.text!r}")


PARALLEL_MODEL = "unmask-parallel-small"
PARALLEL = dict(block_size=8, tau=0.15, temperature=1.0, gen_length=16)   # one decoder, one τ, for both


def bake_parallel(adapter, out: Path) -> None:
    """The tour's pair (assets/examples/parallel_copy.npz, parallel_shuffle.npz): the same held-out line of names
    copied and shuffled by the same threshold rule at τ 0.15, each block filled in one forward; the first line and
    seed where the copy is right and the shuffle repeats a name."""
    from engine.tasks.common import Problem
    copy, shuffle = get_task("copy"), get_task("shuffle")
    for seed in range(8):
        for prob in copy.problems("test", 20, seed=0):
            line = prob.answer["line"]
            twin = Problem(f"Q : shuffle : {' '.join(line)} . A :", "", dict(prob.answer, op="shuffle"), "shuffle")
            runs = [Generation(adapter, p.typed, build_decoder("threshold", seed=seed, **PARALLEL)).run()
                    for p in (prob, twin)]
            if copy.check(runs[0].meta.text, prob) and shuffle.verdict(runs[1].meta.text, twin) == "wrong":
                for name, tr in zip(("parallel_copy", "parallel_shuffle"), runs):
                    tr.save(out / f"{name}.npz")
                    print(f"{name}: {tr.meta.prompt!r} -> {tr.meta.text!r} NFE {tr.nfe} seed {seed}")
                return
    raise SystemExit("no held-out line shows the collapse at this setting")


def repaired(trace, prob) -> bool:
    """A verify forward rejected a draft and the answer came out right: the verifier repaired a parallel commit."""
    return get_task(prob.task).verdict(trace.meta.text, prob) == "valid" and len(rejecting(trace)) >= 2


if __name__ == "__main__":
    main()
