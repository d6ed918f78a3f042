"""Unmask as an lm-evaluation-harness model (optional extra: ``pip install -r requirements-eval.txt``).

    python -m engine.harness.lmeval --model unmask \\
        --model_args pretrained=/srv/models/LLaDA-8B-Instruct,decoder="threshold:tau=0.9,block_size=32",batch_size=8 \\
        --tasks gsm8k --log_samples --output_path results/lm_eval

takes lm_eval's own flags: it registers the ``unmask`` model, then runs lm_eval's command line (lm-eval 0.4.13
finds third-party models only once they are imported; ``import engine.harness.lmeval`` does the same for
``lm_eval.simple_evaluate``).

``generate_until`` decodes every request with the decoder SPEC, batched through the bench's scheduler (up to
``batch_size`` decodes per round), each with its own seed (the bench's ``problem_seed`` of the request's index),
then cuts the text at the first of the request's ``until`` strings. A SPEC without ``gen_length`` decodes the
request's ``max_gen_toks`` (default 256), rounded up to whole blocks. The context is encoded as plain text, as
lm_eval's own models do; ``--apply_chat_template`` renders it with the checkpoint's chat template first.

Each logged sample carries the run's numbers in its request's generation arguments
(``arguments.gen_args_0.arg_1.unmask`` in lm_eval's samples file: NFE, NFE in the papers' count, tokens, TPF,
seconds and, with ``trace_dir=DIR``, the path of the decode's trace, which ``python app.py`` cannot open but
``engine.records.trace.Trace.load`` and the explorer's export tools can).

Log-likelihood requests (multiple-choice tasks) are refused: a diffusion model has no left-to-right likelihood;
LLaDA's evaluation estimates it by Monte-Carlo over masking ratios, which Unmask does not implement.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from engine.harness.bench import decode_problem
from engine.decoders import build_decoder
from engine.errors import ConfigError, UserError
from engine.models.model import load_model, read_config, resolve_model_path
from engine.runtime.resources import cached_loader
from engine.runtime.jobs import Scheduler
from engine.runtime.lifecycle import stop_all
from engine.catalogue.spec import parse_spec

LOGLIKELIHOOD = ("unmask: log-likelihood requests are not supported: a diffusion model has no left-to-right "
                 "likelihood (LLaDA estimates one by Monte-Carlo over masking ratios); use generate_until tasks")


def spec_of(decoder: str, keys: dict) -> tuple[str, dict]:
    """(name, params) of the SPEC. lm_eval splits --model_args at every comma, so the SPEC's later keys arrive as
    arguments of their own (``decoder=threshold:tau=0.9,block_size=32`` gives block_size=32 beside it): those
    are the SPEC's; any other name is an error."""
    from engine.catalogue import catalogue
    name, params = parse_spec(decoder)
    unknown = sorted(k for k in keys if k not in catalogue.PARAMS)
    if unknown:
        raise ConfigError(f"unmask: unknown model argument(s) {', '.join(unknown)}: expected pretrained, decoder, "
                          "batch_size, device, seed, trace_dir or a parameter of the decoder SPEC")
    return name, {**params, **{k: str(v) for k, v in keys.items()}}


def usable(device: str | None) -> str | None:
    """lm_eval's command line asks for "cuda" unless told otherwise: without CUDA, the engine's own choice."""
    import torch
    if device and str(device).startswith("cuda") and not torch.cuda.is_available():
        print(f"unmask: {device} is not available here; decoding on the engine's default device", file=sys.stderr)
        return None
    return device


SAMPLING = ("temperature", "top_p", "top_k")
KNOWN = {"until", "max_gen_toks", "do_sample", *SAMPLING}


def stops(gen_kwargs: dict) -> list[str]:
    """The request's stop strings: lm-eval wraps a single string in a list, and so do we."""
    until = gen_kwargs.get("until") or []
    return [until] if isinstance(until, str) else [s for s in until if isinstance(s, str) and s]


def max_gen_toks(gen_kwargs: dict) -> int:
    return int(gen_kwargs.get("max_gen_toks", 256))


def request_sampling(gen_kwargs: dict, spec: dict) -> dict:
    """The request's sampling arguments as SPEC parameters: temperature, top_p, top_k as they are, do_sample
    false as temperature 0. The SPEC's own values win (a warning says so); an argument Unmask cannot honour is
    refused with its name, never dropped."""
    unknown = sorted(k for k in gen_kwargs if k not in KNOWN and k != "unmask")
    if unknown:
        raise ConfigError(f"unmask: generation argument(s) {', '.join(unknown)} are not supported (known: "
                          f"{', '.join(sorted(KNOWN))})")
    out = {k: str(gen_kwargs[k]) for k in SAMPLING if k in gen_kwargs}
    if gen_kwargs.get("do_sample") is False:
        out["temperature"] = "0"
    overridden = sorted(k for k in out if k in spec and str(spec[k]) != out[k])
    if overridden:
        print(f"unmask: the decoder SPEC's {', '.join(overridden)} override the request's", file=sys.stderr)
    return out


DECODER = "threshold:tau=0.9,block_size=32"
OWN = ("batch_size", "max_batch_size", "device", "seed", "trace_dir")     # UnmaskLM's arguments beside the SPEC


def checked(pretrained: str, decoder: str, spec_keys: dict) -> tuple[str, dict]:
    """(name, params) of the SPEC, once the model path and the SPEC are known good (``UserError`` otherwise),
    without loading the model."""
    if not pretrained:
        raise ConfigError("unmask: --model_args needs pretrained=PATH (a local checkpoint or an embedded model)")
    name, params = spec_of(str(decoder), spec_keys)
    build_decoder(name, **params)
    read_config(resolve_model_path(str(pretrained)))
    return name, params


def check_first() -> None:
    """``checked`` on the command line's ``--model_args`` before lm_eval's own command line runs: that indexes
    every task lm_eval ships (about 24 s of CPU) before it makes the model, so a bad argument took that long to be
    told. Where the arguments come from elsewhere (a ``--config`` file), the model's own check tells."""
    from lm_eval._cli import HarnessCLI
    args = HarnessCLI().parse_args()
    if getattr(args, "model", None) == "unmask" and isinstance(getattr(args, "model_args", None), dict):
        keys = {k: v for k, v in args.model_args.items() if k not in OWN}
        checked(str(keys.pop("pretrained", "")), str(keys.pop("decoder", DECODER)), keys)


@register_model("unmask")
class UnmaskLM(LM):
    def __init__(self, pretrained: str = "", decoder: str = DECODER, batch_size=8,
                 max_batch_size=None, device: str | None = None, seed: int = 0, trace_dir: str = "",
                 **spec_keys) -> None:
        super().__init__()
        self.name, self.params = checked(pretrained, decoder, spec_keys)
        self.adapter = load_model(str(pretrained), device=usable(device))
        self.batch = max(1, int(batch_size)) if str(batch_size).isdigit() else 8
        self.seed, self.trace_dir = int(seed), Path(trace_dir) if trace_dir else None
        self.load = cached_loader(self.adapter.device)

    @property
    def tokenizer_name(self) -> str:
        return str(getattr(self.adapter.tokenizer, "name_or_path", "unmask")).replace("/", "__")

    def chat_template(self, chat_template=False) -> str | None:
        return getattr(self.adapter.tokenizer, "chat_template", None)

    def apply_chat_template(self, chat_history: list[dict], add_generation_prompt: bool = True) -> str:
        """--apply_chat_template: the conversation rendered by the checkpoint's own template."""
        return self.adapter.tokenizer.apply_chat_template(chat_history, tokenize=False,
                                                         add_generation_prompt=add_generation_prompt)

    def loglikelihood(self, requests):
        raise NotImplementedError(LOGLIKELIHOOD)

    def loglikelihood_rolling(self, requests):
        raise NotImplementedError(LOGLIKELIHOOD)

    def policy_for(self, gen_kwargs: dict):
        """The SPEC's policy for one request: without a gen_length in it, the request's max_gen_toks in whole
        blocks; the request's sampling arguments (``request_sampling``) where the SPEC does not set them."""
        params = {**request_sampling(gen_kwargs, self.params), **self.params}
        if "gen_length" not in params:
            block = int(params.get("block_size", build_decoder(self.name, **params).cfg.block_size))
            params["gen_length"] = str(block * math.ceil(max_gen_toks(gen_kwargs) / block))
        return build_decoder(self.name, **params)

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        jobs = []
        for i, req in enumerate(requests):
            context, gen_kwargs = req.args
            policy = self.policy_for(gen_kwargs)
            prob = SimpleNamespace(prompt=context, chat=False)      # lm_eval's text as it is
            jobs.append(lambda p=prob, pol=policy, i=i: decode_problem(self.adapter, p, pol, pol.cfg, self.seed, i,
                                                                      None, None, self.load))
        out: list[str] = [""] * len(requests)
        for i, trace, seconds in Scheduler(jobs, self.batch).events():
            out[i] = self.record(requests[i], i, trace, seconds)
        return out

    def record(self, req, i: int, trace, seconds: float) -> str:
        """The request's answer: at most its max_gen_toks tokens, cut at its first stop string; its numbers go
        into its generation arguments."""
        _, gen_kwargs = req.args
        text = self.adapter.decode(trace.meta.token_ids[:max_gen_toks(gen_kwargs)])
        for stop in stops(gen_kwargs):
            if stop in text:
                text = text[:text.index(stop)]
        stats = dict(nfe=trace.nfe, nfe_paper=trace.nfe_paper, tokens=trace.meta.generated_tokens,
                     tpf=trace.meta.generated_tokens / max(1, trace.nfe), seconds=round(seconds, 4),
                     decoder=self.name, seed=trace.meta.seed)
        if self.trace_dir is not None:
            self.trace_dir.mkdir(parents=True, exist_ok=True)
            path = self.trace_dir / f"{req.task_name or 'task'}-{req.doc_id}-{i}.npz"
            trace.save(path)
            stats["trace"] = str(path)
        if isinstance(gen_kwargs, dict):
            gen_kwargs["unmask"] = stats
        return text


def main(argv=None) -> None:
    from lm_eval.__main__ import cli_evaluate
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    try:
        check_first()
        cli_evaluate()
    except UserError as e:               # a bad SPEC, model argument or model path: one line, exit 2
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2)
    finally:                             # the engine thread ended and the output written before the exit
        stop_all()                       # (engine.runtime.lifecycle)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
