"""The columns the docs' tables share, and the row transforms that derive what a record stores only as outcomes
(each paired comparison is recomputed from the per-problem outcomes, so a table cannot disagree with its record)."""

from __future__ import annotations

from engine.harness import stats
from tools.results.render import Column, dig


def acc(r: dict) -> str:
    ci = r.get("accuracy_ci95")
    return stats.fmt_ci(r["accuracy"], ci) if ci else f"{r['accuracy']:.3f}"


def nfe_per_token(r: dict):
    return r.get("nfe_per_token") or (1 / r["tpf"] if r.get("tpf") else None)


def verdicts(r: dict) -> str:
    v = r.get("verdicts") or {}
    return ", ".join(f"{k} {n}" for k, n in sorted(v.items(), key=lambda kv: (-kv[1], kv[0])))


def spec(r: dict) -> str:
    """The setting as code; in bold where the row says so (a point on its family's Pareto front)."""
    return f"**`{r['spec']}`**" if r.get("bold") else f"`{r['spec']}`"


def paired(rows: list[dict], base) -> list[dict]:
    """Each row with ``vs`` (a–b, exact McNemar p) against the row whose spec is ``base`` (or index ``base``);
    the base row reads "base". Rows without per-problem outcomes get "–"."""
    b = rows[base] if isinstance(base, int) else next(r for r in rows if r["spec"] == base)
    out = []
    for r in rows:
        if r is b:
            vs = "base"
        elif "outcomes" in r and "outcomes" in b:
            c = stats.compare(r["spec"], _outcomes(r), b["spec"], _outcomes(b))
            vs = f"{c['a_only']}–{c['b_only']}, p = {c['p']:.2g}" + ("" if c["significant"] else " (within noise)")
        else:
            vs = "–"
        out.append(dict(r, vs=vs))
    return out


def _outcomes(r: dict) -> list[bool]:
    return [ch == "1" for ch in r["outcomes"]]


def labelled(groups: dict[str, list[dict]], key: str = "group") -> list[dict]:
    """The rows of several groups in one table, each row carrying its group's label under ``key``."""
    return [dict(r, **{key: label}) for label, rows in groups.items() for r in rows]


def each(record: dict, paths: dict[str, str], base=None) -> list[dict]:
    """``labelled`` over dotted paths of one record, each group paired with its own ``base`` when given."""
    return labelled({label: paired(dig(record, p), base) if base is not None else dig(record, p)
                     for label, p in paths.items()})


SETTING = Column("setting", spec)
ACC = Column("accuracy [95 % CI]", acc)
VS = Column("paired vs base (row only – base only)", "vs")
NFE = Column("NFE / sample", "nfe", ".2f")
NFE_PAPER = Column("NFE papers' count", "nfe_paper", ".2f")
NFE_TOKEN = Column("NFE / token", nfe_per_token, ".3f")
TPF = Column("TPF", "tpf", ".2f")
TOKS = Column("tokens/s", "tokens_per_s", ".0f")
N = Column("n (distinct)", lambda r: f"{r['n']} ({r.get('n_prompts', '?')})")
VERDICTS = Column("verdicts", verdicts)
GROUP = Column("", "group")
