"""An accelerator stood in for on the CPU: ``OnDevice`` is a CPU tensor whose descendants stay "on the device" and
whose every way back to the host is counted with its bytes, so a rule that reads a whole row of the vocabulary on
the host (a ``.numpy()`` of the logits, a ``.cpu()`` of the probabilities) shows here without a GPU.

``strict``: an op that mixes an ``OnDevice`` tensor with a host tensor of one or more dimensions raises, as CUDA
does (a host index tensor is let through: CUDA copies it up). ``syncs`` (stricter, the GPU's own cost): every read
that makes the host wait for the device raises, except ``.cpu()``, the copy the round plans (``engine.runtime.device
.host``), which is counted: ``.item()``, ``float()``, ``int()``, ``bool()``, ``.tolist()``, ``.numpy()`` of a device
tensor; a host index tensor applied to one (a blocking copy up) or a device bool mask indexing one (a ``nonzero``:
the result's size is read); ``nonzero``, ``unique``, ``masked_select``; ``torch.multinomial`` (it checks its
distribution with two ``.item()``); ``Categorical``'s argument checks (a ``bool()``). Copies up go through
``engine.runtime.device.to_device`` (without blocking), the only way a host tensor reaches a device tensor here.
"""

from __future__ import annotations

import torch

T = torch.Tensor
TO_HOST = {T.cpu, T.numpy, T.tolist, T.item, T.__bool__, T.__int__, T.__float__, T.__index__, T.__array__,
           T.__format__}
INDEXING = {T.__getitem__, T.__setitem__}          # a host index may meet a device tensor (CUDA copies it up)
NUMPY = {T.numpy, T.__array__}                       # CUDA refuses these outright: a device tensor is read by .cpu()
FREE = {T.size, T.dim, T.numel, T.__len__, T.device.__get__, T.dtype.__get__, T.shape.__get__, T.ndim.__get__,
        T.is_cuda.__get__, T.requires_grad.__get__, T.__repr__}
# ops whose result's size, or whose own checks, are read on the host: each waits for the device
SIZED = {torch.nonzero, T.nonzero, torch.argwhere, T.argwhere, torch.masked_select, T.masked_select, torch.unique,
         T.unique, torch.unique_consecutive, T.unique_consecutive, torch.multinomial, T.multinomial}


class OnDevice(torch.Tensor):
    """``copies``: (what, bytes) of every way to the host since the last ``reset``."""
    copies: list[tuple[str, int]] = []
    strict = False
    syncs = False

    @classmethod
    def reset(cls, strict: bool = False, syncs: bool = False) -> None:
        cls.copies, cls.strict, cls.syncs = [], strict or syncs, syncs

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if cls.strict and func in NUMPY:
            raise RuntimeError(f"{func.__name__} of a device tensor (CUDA refuses it: .cpu() first)")
        if cls.syncs:
            _unplanned(func, args)
        if func in TO_HOST:
            with torch._C.DisableTorchFunctionSubclass():
                plain = args[0].as_subclass(torch.Tensor)
            cls.copies.append((func.__name__, plain.numel() * plain.element_size()))
            return func(plain, *args[1:], **kwargs)
        operands = (args[:1] + args[2:]) if func in INDEXING else args
        if cls.strict and func not in FREE and _host_operand(operands, kwargs):
            raise RuntimeError(f"{getattr(func, '__name__', func)}: a host tensor meets a device tensor "
                               "(CUDA would refuse this)")
        return super().__torch_function__(func, types, args, kwargs)

    @classmethod
    def bytes(cls) -> int:
        return sum(n for _, n in cls.copies)


def _unplanned(func, args) -> None:
    """Raise where ``func`` would make the host wait for the device outside the round's planned copy."""
    name = getattr(func, "__name__", str(func))
    if func in TO_HOST and func is not T.cpu and isinstance(args[0], OnDevice):
        raise RuntimeError(f"{name} of a device tensor: a read the round did not plan (a sync per decode)")
    if func in SIZED or (func is torch.where and len(args) == 1):
        raise RuntimeError(f"{name} on the device reads its result's size or checks on the host (a sync)")
    if func in INDEXING and any(isinstance(a, OnDevice) for a in args[:1]):
        index = args[1] if isinstance(args[1], tuple) else (args[1],)
        if _host_operand(index, {}):
            raise RuntimeError(f"{name}: a host index tensor applied to a device tensor (a blocking copy up)")
        scalar_fill = func is T.__setitem__ and isinstance(args[2], (int, float, bool))       # masked_fill
        if not scalar_fill and any(isinstance(i, OnDevice) and i.dtype == torch.bool for i in index):
            raise RuntimeError(f"{name}: a device bool mask as an index (a nonzero: its size is read)")


def _host_operand(args, kwargs) -> bool:
    stack = list(args) + list(kwargs.values())
    while stack:
        a = stack.pop()
        if isinstance(a, (list, tuple)):
            stack.extend(a)
        elif isinstance(a, torch.Tensor) and not isinstance(a, OnDevice) and a.dim() > 0:
            return True
    return False


def widen(logits: torch.Tensor, width: int | None) -> torch.Tensor:
    """The logits (…, V) with ``width − V`` more columns, each 30 below the row's least logit: a model whose output
    layer has ``width`` tokens, the extra ones all but impossible (their mass about width · e⁻³⁰)."""
    if width is None or width <= logits.shape[-1]:
        return logits
    low = logits.amin(-1, keepdim=True) - 30
    return torch.cat([logits, low.expand(*logits.shape[:-1], width - logits.shape[-1])], -1)


def patch_forwards(monkeypatch, width: int | None = None) -> list:
    """Every forward of the scheduler (both forward paths) returns ``OnDevice`` logits widened to ``width``, and
    the canvas model's calls ``OnDevice`` logits; returns the rounds' forward counts."""
    import engine.runtime.scheduler as sched
    calls, run = [], sched.run_forwards

    def on_device(adapter, reqs):
        calls.append(len(reqs))
        return [widen(x, width).as_subclass(OnDevice) for x in run(adapter, reqs)]
    monkeypatch.setattr(sched, "run_forwards", on_device)
    from engine.models.model import CanvasAdapter
    denoise = CanvasAdapter.denoise                  # not widened: its logits condition its next forward

    def denoise_on_device(self, *args, **kwargs):          # the model lives on the device: its inputs are plain
        args = [a.as_subclass(torch.Tensor) if isinstance(a, OnDevice) else a for a in args]
        return denoise(self, *args, **kwargs).as_subclass(OnDevice)
    monkeypatch.setattr(CanvasAdapter, "denoise", denoise_on_device)
    return calls
