"""Per-position token statistics and candidate selection, shared by every decoder.

candidate   the token a decoder would write: argmax, or a Gumbel-max sample at temperature T (float64, as LLaDA and
            Fast-dLLM do), after optional top-k / top-p filtering.
confidence  top-1 probability of the untempered softmax at the candidate (Fast-dLLM family convention).
margin      top-1 minus top-2 probability.
entropy     normalised entropy H / ln |V| in [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from engine.runtime.device import host, rand_like_rows
from engine.models.memory import chunk_limit

TOP_K = 5  # candidates recorded per position and forward (token ids + probabilities)


@dataclass
class TokenStats:
    candidate: torch.Tensor   # (q,) long
    confidence: torch.Tensor  # (q,) float, p(candidate)
    margin: torch.Tensor      # (q,)
    entropy: torch.Tensor     # (q,) normalised
    probs: torch.Tensor       # (q, V) untempered softmax, float64; on the model's device unless the decoder reads it
    top1: torch.Tensor        # (q,) argmax token (may differ from candidate when sampling)
    top_ids: torch.Tensor | None = None   # (q, TOP_K) the candidates a person inspects per position
    top_p: torch.Tensor | None = None     # (q, TOP_K) their probabilities


def filter_logits(logits: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Top-k then nucleus filtering; filtered entries become -inf. logits (q, V)."""
    out = logits.clone()
    if top_k and top_k < out.shape[-1]:
        kth = torch.topk(out, top_k, dim=-1).values[..., -1:]
        out[out < kth] = float("-inf")
    if top_p < 1.0:
        sorted_logits, idx = torch.sort(out, descending=True, dim=-1)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
        drop = cum - torch.softmax(sorted_logits, dim=-1) >= top_p  # keep the token that crosses top_p
        sorted_logits[drop] = float("-inf")
        out = torch.full_like(out, float("-inf")).scatter(-1, idx, sorted_logits)
    return out


def transformed_probs(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """The sampling distribution (temperature, top-k, top-p, softmax) in float64. T = 0 gives the plain softmax,
    unfiltered, as S2D2's and SDAR's ``_probs_from_logits`` do (greedy decoding ignores top-k / top-p)."""
    if temperature <= 0:
        return torch.softmax(logits.double(), dim=-1)
    return torch.softmax(filter_logits(logits.double(), top_k, top_p) / temperature, dim=-1)


def token_stats(logits: torch.Tensor, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                generator: torch.Generator | None = None) -> TokenStats:
    """logits (q, V) -> TokenStats. Random draws come only from `generator`, so a seed fixes the trace."""
    return token_stats_batch([logits], temperature, top_k, top_p, [generator])[0]


def token_stats_batch(parts: list[torch.Tensor], temperature: float, top_k: int, top_p: float,
                      generators: list, mask_id: int | None = None,
                      precision: torch.dtype = torch.float64) -> list[TokenStats]:
    """The statistics of several decodes' rows (q_i, V) in one call (the scheduler's round), on the logits'
    device, in chunks of whole parts (``chunk_groups``). What the decoders' rules and the records read crosses to
    the host as one (Q, 4 + 2·TOP_K) copy per round; ``probs`` stays on the device, where the rules reduce it
    further (``engine.runtime.device``). Each part draws its Gumbel noise on the device from its own generator (the
    decode's device generator), in part order, so a decode's draws do not depend on which decodes share its round.
    ``mask_id``: forbid predicting [MASK] (``Runner.unmaskable``). Chunks: ``engine.models.memory.CHUNK``. ``precision``: the softmax's dtype (float64, or
    the model's as LLaDA's release ranks ``F.softmax`` of its bf16 logits)."""
    limit = chunk_limit(parts[0].device)
    chunks = []
    for g in chunk_groups([p.numel() for p in parts], parts[0].device):
        ps, gs = [parts[i] for i in g], [generators[i] for i in g]
        if len(ps) == 1 and ps[0].numel() > limit:                 # one part past the limit: by rows
            chunks.append(([ps[0]], *by_rows(ps[0], limit, temperature, top_k, top_p, gs[0], mask_id, precision)))
        else:
            chunks.append((ps, *_stats(ps, temperature, top_k, top_p, gs, mask_id, precision)))
    small = chunks[0][1] if len(chunks) == 1 else torch.cat([c[1] for c in chunks])
    return unpack(host(small).numpy(), chunks)                     # (Q, 4 + 2K): the round's one copy to the host


def by_rows(part: torch.Tensor, limit: int, temperature, top_k, top_p, generator, mask_id,
            precision) -> tuple[torch.Tensor, torch.Tensor]:
    """One part's statistics in pieces of whole rows of at most ``limit`` elements (at least one row), its softmax
    written into one (q, V) float64 tensor: the peak is the part's softmax and one piece's temporaries, not five
    (q, V) float64 tensors. Row by row the same numbers; the noise is drawn piece after piece from the decode's
    generator (on a CPU the same stream as one draw; on an accelerator a stream that depends only on the part's
    shape and ``limit``, never on the round's company)."""
    rows = max(1, limit // part.shape[-1])
    probs = part.new_empty(part.shape, dtype=torch.float64)
    small = []
    for a in range(0, len(part), rows):
        s, p = _stats([part[a:a + rows]], temperature, top_k, top_p, [generator], mask_id, precision)
        probs[a:a + rows] = p
        small.append(s)
    return torch.cat(small), probs


def stats_on_device(logits: torch.Tensor, temperature: float, top_k: int, top_p: float,
                    generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One decode's statistics as a rule makes them itself (SimSD's drafter): the (q, 4 + 2K) small statistics
    and the (q, V) softmax on the device, not yet read: the rule reads ``small`` with the round's other rules
    (``engine.runtime.device.read``) and ``unpack``s it."""
    return _stats([logits], temperature, top_k, top_p, [generator], None)


def unpack(small: np.ndarray, chunks: list) -> list[TokenStats]:
    """Each part's ``TokenStats`` from the read (Q, 4 + 2K) statistics; ``chunks``: (parts, _, probs) per chunk."""
    K = (small.shape[1] - 4) // 2                                  # columns: candidate, top-K ids, confidence,
    ids = small[:, :1 + K].astype(np.int64)                        # margin, entropy, top-K probabilities
    f32 = small[:, 1 + K:4 + K].astype(np.float32)
    t = torch.from_numpy                                           # views sliced in numpy: cheaper than torch's
    out, a = [], 0
    for chunk, _, probs in chunks:
        b = 0
        for p in chunk:
            e = a + len(p)
            out.append(TokenStats(t(ids[a:e, 0]), t(f32[a:e, 0]), t(f32[a:e, 1]), t(f32[a:e, 2]),
                                  probs[b:b + len(p)], t(ids[a:e, 1]), t(ids[a:e, 1:]), t(small[a:e, 4 + K:])))
            a, b = e, b + len(p)
    return out


def chunk_groups(sizes: list[int], device: torch.device) -> list[list[int]]:
    """Consecutive parts (their indices) in groups of at most ``chunk_limit`` elements; a part larger than the
    limit is a group alone (``by_rows`` then splits it). (A round of twelve decodes of 32 rows at V = 126 464
    would otherwise allocate 0.4 GB per float64 temporary on the CPU.)"""
    limit = chunk_limit(device)
    groups, size = [[]], 0
    for i, n in enumerate(sizes):
        if groups[-1] and size + n > limit:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += n
    return groups


def _stats(parts, temperature, top_k, top_p, generators, mask_id,
           precision=torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk of rows (Q, V) -> (Q, 4 + 2K) float64 [candidate, top-K ids, confidence, margin, entropy, top-K
    probabilities] and the (Q, V) softmax, on the logits' device; the softmax in ``precision`` (its values then
    held in float64: a bf16 model's logits are exact in float32 and float64, its softmax rounds as the release's)."""
    z = (parts[0] if len(parts) == 1 else torch.cat(parts)).to(torch.float64, copy=True)   # (Q, V): ours to write
    if mask_id is not None:
        z[:, mask_id] = float("-inf")
    low = precision != torch.float64
    probs = torch.softmax(z.to(precision) if low else z, dim=-1).double()                  # (Q, V)
    V = probs.shape[-1]
    top = torch.topk(probs, min(TOP_K, V), dim=-1)                # (Q, K): the first two give top-1 and the margin
    if temperature > 0:
        zf = filter_logits(z, top_k, top_p)
        u = torch.cat([rand_like_rows(p.shape, g, z) for p, g in zip(parts, generators)])
        gumbel = -torch.log(-torch.log(u.clamp_min(1e-300)))
        candidate = (zf / temperature + gumbel).argmax(-1)                                        # Gumbel-max
        conf = probs.gather(-1, candidate[:, None])[:, 0]
    elif low:              # rounded probabilities tie where the logits do not: the release takes argmax(logits)
        candidate = z.argmax(-1)
        conf = probs.gather(-1, candidate[:, None])[:, 0]
    else:
        candidate, conf = top.indices[:, 0], top.values[:, 0]                # the argmax and its probability
    margin = top.values[:, 0] - (top.values[:, 1] if V > 1 else 0)
    ent = torch.special.entr(probs).sum(-1) / math.log(V)         # = -(p log p).sum(-1), bit for bit, in one pass
    ids = torch.cat([candidate[:, None], top.indices], 1).double()                                 # (Q, 1 + K)
    return torch.cat([ids, torch.stack([conf, margin, ent], 1), top.values], 1), probs


def race(p: torch.Tensor, k: int, generator) -> torch.Tensor:
    """(m, k) ids: ``torch.multinomial(p, k)``'s own draw (one sample, or k without replacement) for rows p (m, V):
    the k largest p / Exp(1), the same noise from the same generator, so the same ids, without its two checks of
    p on the host (each a sync on a device)."""
    return torch.topk(p / torch.empty_like(p).exponential_(1, generator=generator), k).indices if k > 1 else \
        (p / torch.empty_like(p).exponential_(1, generator=generator)).argmax(-1, keepdim=True)


def make_generator(seed: int) -> torch.Generator:
    g = torch.Generator(device="cpu")
    g.manual_seed(int(seed))
    return g
