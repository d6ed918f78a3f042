"""Benchmark decoders on a task's held-out split, all in one process so speed ratios are fair on a noisy machine.

Per decoder: accuracy (the task's checker), NFE per sample, TPF (generated tokens per forward, the stop token
included since it cost a forward), tokens/s (generated tokens / decode wall time) and the speed ratio of tokens/s
to the first decoder. Decoders run interleaved problem by problem, so drift in machine speed hits all of them alike.

Teaching columns: ``confident_share`` (share of masked-position confidences >= 0.9 over all draft forwards: how
much a confidence heatmap has to show), ``reject_rate`` (verifier rejections per verified token, for verifying
decoders), ``per_task`` accuracy and the checker's ``verdicts`` (valid / duplicate / inconsistent ...). A decoder
adds its own columns through its card (``BenchCounts``: SimSD's forwards per model, the canvas's denoising steps).

Numbers a reviewer can check: ``n`` problems of which ``n_prompts`` distinct, ``accuracy_ci95`` (Wilson),
``outcomes`` (one "1"/"0" per problem, in order, so any two rows of a run can be compared paired with
``engine.harness.stats.compare``), and ``nfe_paper`` next to ``nfe`` (``Trace.nfe_paper``: the forwards the reference
implementations count). Every problem decodes with its own seed, ``problem_seed(spec seed, run seed, index)``:
with one seed for all, sampled decodes of different prompts would make the same random choices.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from engine.records.trace import fields
from engine.harness import stats
from engine.harness.bench_row import BenchRow
from engine.catalogue.catalogue import SEED_MAX
from engine.decoders import build_decoder, parse_spec
from engine.catalogue.applies import needs_of
from engine.catalogue.cards import SpeculativeSummary, VerifyFields, cards
from engine.errors import BudgetExceeded
from engine.runtime.loop import Generation
from engine.runtime.resources import cached_loader
from engine.runtime.jobs import Scheduler
from engine.tasks import get_task

CONFIDENT = 0.9
CHUNK = 32       # batched runs: problems per decode slot in a chunk (a chunk's last rounds run part-full)


def teaching_counts(trace) -> dict:
    """Counts behind confident_share and reject_rate for one trace, and the decoder's own (its card's)."""
    mask_id, card = trace.meta.mask_token_id, cards().get(trace.meta.decoder)
    fills = card is None or "mask_slots" in needs_of(trace.meta.decoder)     # a canvas has no [MASK] slots
    out = Counter(card.bench.count(trace) if card is not None and card.bench else {})
    for r in trace.records:
        if r.kv.drift is not None:                 # Fast-dLLM's caches with measure_drift
            out.update(drift_n=1, drift_sum=r.kv.drift)
        if r.kind == "draft" and fills:
            was_masked = r.tokens_before == mask_id
            out["masked_conf"] += int(was_masked.sum())
            out["confident"] += int((r.confidence[was_masked] >= CONFIDENT).sum())
        elif (f := fields(r, VerifyFields)) is not None:
            out["verified"] += int(np.isfinite(f.ratio).sum())
            out["rejected"] += int(f.rejected_at is not None)
    return out


def revision_counts(adapter, task, prob, trace, right: bool) -> Counter:
    """What a revising decoder's changes did to this problem: how many it made, and whether the answer without
    them (each revised slot back to the token it first held) would have been judged otherwise by the checker."""
    changes = [(pos, old) for _, pos, _, old, _ in trace.revisions()]
    if not changes:
        return Counter()
    ids, P = list(trace.meta.token_ids), int(trace.meta.prompt_len)
    for pos, old in reversed(changes):              # latest first: each slot ends at its first-written token
        if 0 <= pos - P < len(ids) and old != trace.meta.mask_token_id:
            ids[pos - P] = old
    before = task.verdict(adapter.decode(ids), prob) == "valid"
    return Counter(revisions=len(changes), revised_problems=1, turned_right=int(right and not before),
                   turned_wrong=int(before and not right))


def problem_seed(spec_seed: int, run_seed: int, index: int) -> int:
    """The seed of problem `index` of a run: independent across problems, fixed by (spec seed, run seed, index)."""
    digest = hashlib.sha256(f"unmask/{spec_seed}/{run_seed}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % (SEED_MAX + 1)


def decode_problem(adapter, prob, policy, cfg, run_seed: int, index: int, budget_s, should_stop=None, load=None):
    """One problem's decode with its own seed and its own policy, as the scheduler drives it (a generator that
    returns the trace; None if the run was stopped before it or it outran the budget)."""
    if should_stop is not None and should_stop():   # a stopped run starts no more decodes
        return None
    own = type(policy)(dataclasses.replace(cfg, seed=problem_seed(cfg.seed, run_seed, index)))
    try:
        g = Generation(adapter, prompt_of(adapter, prob), own, budget_s=budget_s, should_stop=should_stop, load=load)
        return (yield from g.requests())
    except BudgetExceeded:
        return None


def prompt_of(adapter, prob):
    """What a problem's decode starts from: its text (a chat model's template wraps it), its ids as plain text
    (``chat`` False), or its whole chat with worked examples (``messages``)."""
    if getattr(prob, "messages", ()):
        return adapter.encode_chat([{"role": r, "content": c} for r, c in prob.messages])
    return prob.prompt if getattr(prob, "chat", True) else adapter.encode_prompt(prob.prompt, chat=False)


def chunk_events(adapter, problems, start: int, policies: list, run_seed: int, batch: int, budget_s, should_stop,
                 load, client: str = ""):
    """(spec, i, trace or None, seconds) for each problem of a chunk as its decode ends: every spec's problems,
    spec after spec, are the jobs of one scheduler run with up to ``batch`` decodes per round (specs share
    forwards); each decode is timed by its share of the rounds it took part in."""
    keys = [(spec, i) for spec, *_ in policies for i in range(len(problems))]
    jobs = [lambda policy=policy, p=p, i=i: decode_problem(adapter, p, policy, policy.cfg, run_seed, start + i,
                                                           budget_s, should_stop, load)
            for _, _, policy in policies for i, p in enumerate(problems)]
    for k, trace, seconds in Scheduler(jobs, batch, client).events():
        yield (*keys[k], trace, seconds)


def decode_chunk(adapter, problems, start: int, policies: list, run_seed: int, batch: int, budget_s, should_stop,
                 load) -> dict[str, list[tuple]]:
    """spec -> (trace, seconds) of each problem of a chunk (``chunk_events``). Stopped (the budget, or
    ``should_stop``): per spec, the problems before the first unfinished one."""
    out = {spec: [None] * len(problems) for spec, *_ in policies}
    for spec, i, trace, seconds in chunk_events(adapter, problems, start, policies, run_seed, batch, budget_s,
                                                should_stop, load):
        out[spec][i] = (trace, seconds) if trace is not None else None
    return {spec: got[:got.index(None)] if None in got else got for spec, got in out.items()}


@dataclass
class Tally:
    """What a run counted, per spec, over a range of problems: mergeable across shards (``merge`` in shard order)
    and JSON-able (the sweep's Ray tasks return it)."""
    acc: dict = field(default_factory=lambda: defaultdict(Counter))
    outcomes: dict = field(default_factory=lambda: defaultdict(list))
    per_task: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    verdicts: dict = field(default_factory=lambda: defaultdict(Counter))
    prompts: list = field(default_factory=list)        # the finished problems' prompts, in order

    def add(self, task, prob, i: int, results: list, adapter, on_trace) -> None:
        """Count one problem's decodes (one per spec)."""
        for spec, tr, wall in results:
            verdict = task.verdict(tr.meta.text, prob)
            self.verdicts[spec][verdict] += 1
            self.per_task[spec][prob.task].append(verdict == "valid")
            self.outcomes[spec].append(verdict == "valid")
            tally(self.acc[spec], tr, wall, verdict == "valid")
            self.acc[spec].update(metric_sums(task, tr.meta.text, prob))
            self.acc[spec].update(revision_counts(adapter, task, prob, tr, verdict == "valid"))
            if on_trace is not None:
                on_trace(spec, i, prob, tr)
        self.prompts.append(prob.prompt)

    def merge(self, other: "Tally") -> "Tally":
        for spec in other.outcomes:
            self.acc[spec].update(other.acc[spec])
            self.outcomes[spec] += other.outcomes[spec]
            self.verdicts[spec].update(other.verdicts[spec])
            for t, v in other.per_task[spec].items():
                self.per_task[spec][t] += v
        self.prompts += other.prompts
        return self

    def to_json(self) -> dict:
        return dict(acc={k: dict(v) for k, v in self.acc.items()}, outcomes=dict(self.outcomes),
                    per_task={k: {t: list(x) for t, x in v.items()} for k, v in self.per_task.items()},
                    verdicts={k: dict(v) for k, v in self.verdicts.items()}, prompts=self.prompts)

    @classmethod
    def from_json(cls, d: dict) -> "Tally":
        t = cls()
        return t.merge(cls(acc={k: Counter(v) for k, v in d["acc"].items()}, outcomes=d["outcomes"],
                           per_task={k: defaultdict(list, v) for k, v in d["per_task"].items()},
                           verdicts={k: Counter(v) for k, v in d["verdicts"].items()}, prompts=d["prompts"]))

    def rows(self, specs: list[str], asked: int, grader: str = "", graded: bool = True) -> list[dict]:
        done = len(self.prompts)
        if not done:
            return []
        cfgs = [(spec, *parse_spec(spec)) for spec in specs]
        return with_speedup([row(spec, name, build_decoder(name, **params).cfg, self.acc[spec], self.per_task[spec],
                                 self.verdicts[spec], self.outcomes[spec], len(set(self.prompts)), asked, grader,
                                 graded)
                             for spec, name, params in cfgs])


def run_bench(adapter, task_name: str, n: int, specs: list[str], seed: int = 0, split: str = "test",
              progress=None, should_stop=None, budget_s: float | None = None, on_trace=None, load=None,
              batch: int = 1, warmup: bool = True) -> list[dict]:
    """Every spec on the first n problems of the split, interleaved problem by problem (``batch`` > 1: chunk by
    chunk of CHUNK × batch problems, every spec's problems of a chunk in one scheduler run).
    ``on_trace(spec, index, problem, trace)`` sees each decode (experiments count from the bench's own traces
    instead of decoding again).
    ``load(name)``: the caller's model cache for resources such as a drafter (default: one for this run).
    ``warmup``: decode the first problem once, untimed, before the run (first-call allocations)."""
    load = load or cached_loader(adapter.device)   # a drafter is loaded once for the run
    if warmup and not warm_up(adapter, task_name, specs[0], seed, split, budget_s, should_stop, load):
        return []
    return bench_tally(adapter, task_name, specs, 0, n, seed, split, progress, should_stop, budget_s, on_trace,
                       load, batch).rows(specs, n, get_task(task_name).grader_name,
                                         getattr(get_task(task_name), "graded", True))


def warm_up(adapter, task_name: str, spec: str, seed: int, split: str, budget_s, should_stop, load) -> bool:
    """Decode the first problem once, untimed (first-call allocations), within the run's limits: False if that
    decode was stopped or outran the budget (a run already stopped skips it)."""
    if should_stop is not None and should_stop():
        return True
    name, params = parse_spec(spec)
    try:
        Generation(adapter, prompt_of(adapter, get_task(task_name).problems(split, 1, seed=seed)[0]),
                   build_decoder(name, **params),
                   budget_s=budget_s, should_stop=should_stop, load=load).run()
    except BudgetExceeded:
        return False
    return True


def bench_tally(adapter, task_name: str, specs: list[str], lo: int, hi: int, seed: int = 0, split: str = "test",
                progress=None, should_stop=None, budget_s=None, on_trace=None, load=None, batch: int = 1) -> Tally:
    """The counts of every spec on problems [lo, hi) of the split (problem i keeps its seed, wherever it runs)."""
    task = get_task(task_name)
    problems = task.problems(split, hi, seed=seed)[lo:]
    policies = [(spec, *parse_spec(spec)) for spec in specs]
    policies = [(spec, name, build_decoder(name, **params)) for spec, name, params in policies]
    load = load or cached_loader(adapter.device)
    out, chunk = Tally(), CHUNK * batch if batch > 1 else 1   # specs interleave chunk by chunk
    for start in range(0, len(problems), chunk):
        if should_stop is not None and should_stop():
            break
        part = problems[start:start + chunk]
        decoded = decode_chunk(adapter, part, lo + start, policies, seed, batch, budget_s, should_stop, load)
        finished = min(len(d) for d in decoded.values())   # a problem counts once every decoder has finished it
        for i, prob in enumerate(part[:finished], start):
            out.add(task, prob, lo + i, [(spec, *decoded[spec][i - start]) for spec, *_ in policies], adapter,
                    on_trace)
        if progress:
            progress(start + finished, len(problems))
        if finished < len(part):   # stopped (or a decode outran the request budget): what finished counts
            break
    return out


def metric_sums(task, text: str, prob) -> Counter:
    """A task's own per-sample metrics (``metrics``: ParallelBench's score and score_strict, ROUGE, ...), as sums,
    sums of squares and counts, so that a row gives each one's mean and interval."""
    got = task.metrics(text, prob) if hasattr(task, "metrics") else {}
    out = Counter()
    for k, v in got.items():
        out.update({f"metric:{k}": v, f"metric2:{k}": v * v, f"metric_n:{k}": 1})
    return out


def metric_means(a: Counter) -> dict:
    """name -> {mean, ci95, n}: Wilson for a 0/1 metric (its sum equals its sum of squares only then), else the
    normal approximation mean ± 1.96 sd / sqrt(n)."""
    out = {}
    for key in sorted(k for k in a if k.startswith("metric:")):
        name = key[len("metric:"):]
        s, s2, n = a[key], a[f"metric2:{name}"], a[f"metric_n:{name}"]
        mean = s / n
        if abs(s - s2) < 1e-9 and abs(s - round(s)) < 1e-9:
            ci = list(stats.wilson(round(s), n))
        else:
            var = max(0.0, s2 - n * mean * mean) / max(1, n - 1)        # the sample variance
            half = stats.Z95 * math.sqrt(var / n)
            ci = [mean - half, mean + half]
        out[name] = dict(mean=mean, ci95=ci, n=n)
    return out


def tally(a: Counter, tr, wall: float, correct: bool) -> None:
    a.update(teaching_counts(tr))
    a.update(wall=wall, correct=correct, nfe=tr.nfe, nfe_paper=tr.nfe_paper, tokens=tr.meta.generated_tokens,
             accepted_tokens=own.accepted_tokens if (own := tr.meta.own(SpeculativeSummary)) else 0,
             **{f"nfe_{k}": v for k, v in tr.meta.nfe_by_kind.items()})


def row(spec, name, cfg, a: Counter, per_task: dict, verdicts: Counter, outcomes: list[bool], n_prompts: int,
        asked: int, grader: str = "", graded: bool = True) -> dict:
    done, own = len(outcomes), cards()[name].bench
    fields = dict(decoder=name, spec=spec, params=cfg.params(), n=done, n_prompts=n_prompts,
                  stopped_early=done < asked,
                  seeds="per problem: problem_seed(spec seed, run seed, index)",
                  accuracy=a["correct"] / done, accuracy_ci95=list(stats.wilson(a["correct"], done)),
                  outcomes="".join("1" if o else "0" for o in outcomes),
                  nfe=a["nfe"] / done, nfe_paper=a["nfe_paper"] / done, tpf=a["tokens"] / max(1, a["nfe"]),
                  tpf_paper=a["tokens"] / max(1, a["nfe_paper"]), tokens_per_s=a["tokens"] / max(a["wall"], 1e-9),
                  nfe_by_kind={k[4:]: v / done for k, v in a.items() if k.startswith("nfe_") and k != "nfe_paper"},
                  accepted_tokens=a["accepted_tokens"] / done, wall_s=a["wall"],
                  confident_share=a["confident"] / max(1, a["masked_conf"]),
                  reject_rate=a["rejected"] / a["verified"] if a["verified"] else None,
                  per_task={t: sum(v) / len(v) for t, v in sorted(per_task.items())},
                  per_task_ci95={t: list(stats.wilson(sum(v), len(v))) for t, v in sorted(per_task.items())},
                  verdicts=dict(verdicts), tokens_per_sample=a["tokens"] / done,
                  edits_per_sample=a["revisions"] / done, revised_problems=a["revised_problems"],
                  turned_right=a["turned_right"], turned_wrong=a["turned_wrong"],
                  turned_right_share=a["turned_right"] / max(1, a["revised_problems"]),
                  turned_wrong_share=a["turned_wrong"] / max(1, a["revised_problems"]),
                  drift_mean=a["drift_sum"] / a["drift_n"] if a["drift_n"] else None,
                  grader=grader, extra=own.columns(a, done) if own else {}, metrics=metric_means(a))
    if not graded:      # a task scored by continuous metrics only (ParallelBench's summaries): no accuracy to give
        fields.update(accuracy=None, accuracy_ci95=None, outcomes="", per_task={}, per_task_ci95={})
    return BenchRow(**fields).to_json()


def with_speedup(rows: list[dict]) -> list[dict]:
    base = rows[0]["tokens_per_s"] if rows else 1.0
    for r in rows:
        r["speedup"] = r["tokens_per_s"] / base
    return rows


def format_table(rows: list[dict]) -> str:
    head = (f"{'decoder spec':44s} {'acc [95% CI]':>22s} {'NFE':>7s} {'NFEpap':>7s} {'TPF':>6s} {'tok/s':>8s} "
            f"{'speedup':>8s} {'conf≥.9':>8s} {'reject':>7s}")
    lines = [head, "-" * len(head)]
    if rows:
        lines.insert(0, f"n = {rows[0]['n']} problems, {rows[0]['n_prompts']} distinct prompts; each its own seed")
    for r in rows:
        rej = f"{r['reject_rate']:7.3f}" if r["reject_rate"] is not None else f"{'–':>7s}"
        acc = stats.fmt_ci(r["accuracy"], r["accuracy_ci95"]) if r["accuracy"] is not None else "–"
        lines.append(f"{r['spec']:44s} {acc:>22s} {r['nfe']:7.2f} {r['nfe_paper']:7.2f} {r['tpf']:6.2f} "
                     f"{r['tokens_per_s']:8.1f} {r['speedup']:7.2f}x {r['confident_share']:8.3f} {rej}")
        lines += [f"    {k:40s} {stats.fmt_ci(m['mean'], m['ci95']):>22s}  n = {m['n']}"
                  for k, m in r.get("metrics", {}).items()]
    return "\n".join(lines)
