"""The GPU check, shaped for a short GPU rental: one command, phases in order, the JSON rewritten after each.

    python -m tools.gpu --out $OUT                       # on a CUDA machine: about 7 minutes on one H100 (expected)
    python -m tools.gpu --tiny --out /tmp/gpu            # the same code on the CPU at toy width (the tests run it)
    python -m tools.gpu --out $OUT --static all --refs DIR   # and the static path's sections (a longer lease)

1. ``versions``: torch and transformers against requirements.txt's pins (one line when they differ).
2. ``smoke``: every decoder on a toy model on the device, 16 slots: seconds; the first failure stops the run
   (exit 2, one line), before the large model is built.
3. ``rules``: every decoder at batch 1 on LLaDA-8B's shape (bf16): ms per forward against the bare graph replay of
   the buckets it used (the target: ≤ 1.25×), bytes and copies read back and CUDA's own count of host syncs per
   forward; a seeded sampled decode twice (same tokens).
4. ``mixed``: eight different rules in one round: ms and host syncs per round, tokens equal to each alone.
5. ``compiled``: the compiled forward on the 8B width with a few layers (``FEW_LAYERS``).

A phase or decoder that raises is recorded in the JSON's ``errors`` and the next one runs; the check then exits 1
with one line naming them. ``--out DIR`` receives ``gpu_check.json`` (with ``tools/provenance.py``'s record; ``--commit`` names the commit
where the copy has no ``.git``); stdout gets a summary under 8 KB, stderr a line per step.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from tools import provenance
from tools.gpu import rules
from tools.bench.report import progress
from tools.gpu.common import FEW_LAYERS, LLADA_8B, TINY, shaped_adapter, versions_line, warm_up

SUMMARY_BYTES = 8000


def smoke(device, dtype, prompt: str) -> list[dict]:
    """Every decoder on a toy model on this device; the first failure ends the run with one line."""
    full = shaped_adapter(TINY, device, dtype)
    rows, errors = rules.every_decoder(full, TINY, prompt, gen=16, reps=1)
    if errors:
        name, error = next(iter(errors.items()))
        print(f"smoke run failed at {name}: {error.splitlines()[0][:300]}", file=sys.stderr)
        raise SystemExit(2)
    return [dict(spec=r["spec"], nfe=r["nfe"]) for r in rows]


def phases(args, device, dtype, prompts: list[str]) -> dict:
    """Each phase's callable, in the order they run (a phase's failure is kept and the next one runs)."""
    shape = TINY if args.tiny else LLADA_8B
    state = {}

    def full():
        if "full" not in state:
            t0 = time.perf_counter()
            state["full"] = shaped_adapter(shape, device, dtype)
            state["build_s"] = round(time.perf_counter() - t0, 1)
        return state["full"]

    def rules_phase():
        only = set(args.decoders.split(",")) if args.decoders else None
        rows, errors = rules.every_decoder(full(), shape, prompts[0], args.gen, args.reps, only)
        return dict(build_s=state["build_s"], decoders=rows, errors=errors,
                    seed=rules.same_seed(rules.block_causal(full()), prompts[0], args.gen))

    def mixed_phase():
        drafter = rules.drafter_of(full(), shape)
        return rules.mixed_round(rules.block_causal(full()), prompts, args.gen, load=lambda _n: drafter)

    def compiled_phase():
        from tools.gpu.compiled import gpu_rows
        state.pop("full", None)                   # the large model's memory back before a second one is built
        if device.type == "cuda":
            torch.cuda.empty_cache()
        few = shaped_adapter(TINY if args.tiny else FEW_LAYERS, device, dtype)
        return gpu_rows(few, prompts[0], f"threshold:tau=0.9,block_size=32,gen_length={args.gen}", args.reps)

    out = {"smoke": lambda: smoke(device, dtype, prompts[0]), "rules": rules_phase, "mixed": mixed_phase,
           "compiled": compiled_phase}
    if args.static:
        out["static"] = lambda: static_phase(args, full(), prompts)
    return out


def static_phase(args, adapter, prompts: list[str]) -> dict:
    from tools.gpu.static import sections
    chosen = sections(adapter, prompts, args.gen, args.gen, args.reps, args.refs)
    names = list(chosen) if args.static == "all" else args.static.split(",")
    return {name: chosen[name]() for name in names}


def summary(out: dict) -> str:
    """What a reader needs first, in under ``SUMMARY_BYTES``: per decoder its ratio to the replay and its syncs."""
    lines = [f"device {out['device']} ({out.get('gpu') or 'no GPU'}), {out['dtype']}; {out['versions'] or 'pinned versions'}"]
    rules_out = out.get("rules") or {}
    for r in rules_out.get("decoders", []):
        syncs = "-" if r.get("syncs_per_forward") is None else f"{r['syncs_per_forward']:.2f}"
        ratio = f"{r['ratio']:.2f}x replay" if r.get("ratio") else "no replay"
        lines.append(f"{r['spec'][:44]:44} {r['ms_per_forward']:8.2f} ms/fwd  {ratio:16} syncs/fwd {syncs}  "
                     f"readback {r['readback_bytes_per_forward']:.0f} B/fwd")
    for name, error in {**rules_out.get("errors", {}), **out.get("errors", {})}.items():
        lines.append(f"ERROR {name}: {str(error).splitlines()[0][:200]}")
    mixed = out.get("mixed")
    if mixed:
        lines.append(f"mixed round of {mixed['decodes']}: {mixed['ms_per_round']:.2f} ms/round, syncs/round "
                     f"{mixed['syncs_per_round']}, {mixed['same_as_alone']} of {mixed['decodes']} as alone")
    comp = out.get("compiled")
    if comp:
        d = comp["decode"]
        lines.append(f"compiled: token agreement {d['token_agreement']:.3f}, tokens/s {d['compiled_tokens_per_s']:.1f}"
                     f" vs eager {d['eager_tokens_per_s']:.1f}")
    lines.append("seconds: " + ", ".join(f"{k} {v}" for k, v in out["seconds"].items()))
    text = "\n".join(lines)
    return text if len(text.encode()) <= SUMMARY_BYTES else text.encode()[:SUMMARY_BYTES - 40].decode(
        errors="ignore") + "\n(cut: the JSON has the rest)"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="a folder: gpu_check.json is written there after each phase")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="toy width, on the CPU unless --device says otherwise")
    ap.add_argument("--gen", type=int, default=64, help="slots per decode")
    ap.add_argument("--reps", type=int, default=10, help="replays per bucket (median)")
    ap.add_argument("--only", default="", help="phases to run, commas (default: smoke,rules,mixed,compiled)")
    ap.add_argument("--decoders", default="", help="rules: decoder names to run, commas (default: all)")
    ap.add_argument("--static", default="", help="also the static path's sections: 'all' or names, commas")
    ap.add_argument("--refs", default="", help="for --static released: LLaDA's and Fast-dLLM's generate.py")
    ap.add_argument("--commit", default="", help="the commit measured, where the copy has no .git")
    args = ap.parse_args(argv)
    device = torch.device("cpu" if args.tiny and args.device == "cuda" else args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    path = Path(args.out) / "gpu_check.json"
    out = dict(args=vars(args), device=str(device), gpu=torch.cuda.get_device_name() if device.type == "cuda" else None,
               dtype=str(dtype), versions=versions_line(), errors={}, seconds={})
    if out["versions"]:
        print(out["versions"], file=sys.stderr)
    from engine.tasks import get_task
    prompts = [p.prompt for p in get_task("arith").problems("test", 12, seed=0)]
    warm_up(device)
    only = set(args.only.split(",")) if args.only else None
    for name, fn in phases(args, device, dtype, prompts).items():
        if only is not None and name not in only:
            continue
        t0 = time.perf_counter()
        try:
            out[name] = fn()
        except SystemExit:
            raise
        except Exception as e:              # a phase that breaks must not lose the others' figures
            out["errors"][name] = f"{type(e).__name__}: {e}"[:500]
            progress("error", {name: out["errors"][name]})
        out["seconds"][name] = round(time.perf_counter() - t0, 1)
        provenance.write(path, out, argv, commit=args.commit or None)
    print(summary(out))
    failed = [*(out.get("rules") or {}).get("errors", {}), *out["errors"]]
    if failed:      # the figures are kept, but a lease's script must see that the check did not pass
        print(f"GPU check failed: an error in {', '.join(failed)} (see {path})", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
