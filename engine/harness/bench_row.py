"""One bench row: a setting's counts over its problems, typed (``BenchRow``), written out as the JSON the CLI, the
experiments, the Sweep and the README's tables read (``to_json``). A decoder's own columns (SimSD's forwards per
model, the uniform canvas's denoising steps) come from its card (``engine.catalogue.cards.BenchCounts``) and sit in
``extra``, flat in the JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from engine.catalogue.cards import cards


@dataclass
class BenchRow:
    decoder: str
    spec: str
    params: dict
    n: int                          # problems decoded
    n_prompts: int                  # distinct prompts among them
    stopped_early: bool             # a budget or Stop ended the run before every problem asked
    seeds: str                      # how each problem's seed is made
    accuracy: float | None          # None: a task graded by continuous metrics only (``metrics``)
    accuracy_ci95: list | None      # 95 % Wilson interval
    outcomes: str                   # "1"/"0" per problem, in order: the paired tests read it
    nfe: float                      # forwards per problem
    nfe_paper: float                # ... in the papers' count
    tpf: float                      # tokens per forward (a SimSD row's JSON: its card's target-equivalent TPF)
    tpf_paper: float
    tokens_per_s: float
    nfe_by_kind: dict               # forwards per problem by record kind
    accepted_tokens: float          # per problem (speculative decoders)
    wall_s: float                   # decode seconds, summed over problems
    confident_share: float          # share of masked-slot confidences >= 0.9 over all draft forwards
    reject_rate: float | None       # verifier rejections per verified token (None: nothing verified)
    per_task: dict                  # accuracy per task of a mix
    per_task_ci95: dict
    verdicts: dict                  # the task checker's verdicts, counted
    tokens_per_sample: float
    edits_per_sample: float         # revisions per problem (decoders that change their mind)
    revised_problems: int
    turned_right: int
    turned_wrong: int
    turned_right_share: float
    turned_wrong_share: float
    speedup: float = 1.0            # tokens/s against the first row of its bench (``bench.with_speedup``)
    drift_mean: float | None = None # kv_cache with measure_drift: mean max |Δ logit| per forward (else left out)
    grader: str = ""                # who graded the answers, with its version (``TaskBase.grader_name``)
    extra: dict = field(default_factory=dict)   # the decoder's own columns (its card's BenchCounts)
    metrics: dict = field(default_factory=dict)  # the task's own metrics: name -> {mean, ci95, n} (ParallelBench's)

    def to_json(self) -> dict:
        """The row as a JSON-able dict: the decoder's columns flat beside the others (one named like a common
        column replaces it: SimSD's tpf counts target-equivalent forwards), no drift where none was measured."""
        d = {k: v for k, v in asdict(self).items() if k != "extra" and not (k == "drift_mean" and v is None)
             and not (k == "metrics" and not v)}
        return {**d, **self.extra}

    @classmethod
    def from_json(cls, d: dict) -> "BenchRow":
        """A row read back (later keys added by a consumer, such as a paired comparison, are left out)."""
        names = {f.name for f in fields(cls)} - {"extra"}
        own = cards()[d["decoder"]].bench if d.get("decoder") in cards() else None
        extra = {k: d[k] for k in (own.names if own else ()) if k in d}
        return cls(**{k: v for k, v in d.items() if k in names}, extra=extra)
