"""Traces made read-only, for the ones a server shares between its visitors (the page's pre-baked examples).

A shared trace that a handler changes changes what every later visitor is shown, until the server restarts: a
branch of the opening example re-owned the example's records for the branch's decoder (issue 74: every new
visitor's opening run then carried an S2D2 tab of grey cells). ``freeze`` makes such a trace read-only all the way
down, so a change raises where it is made instead of leaking: its arrays are not writeable (a read-only view of a
read-only array: setting ``flags.writeable`` back is refused too), its records, its metadata, the trace itself and
any other dataclass instance in them refuse attribute assignment, its dicts and lists refuse every change, and its
tuples hold frozen values. ``frozen_value`` does the same for any such value (the app's held-out problems and model
cards). Reading is unchanged (the frozen classes are subclasses of the plain ones; a frozen dict is a dict, a frozen
list a list), and a copy (``copy.copy``, ``deepcopy``, ``dataclasses.asdict``, a pickle) is a plain, writeable one
where it is a container or a dataclass.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields, is_dataclass, replace

import numpy as np

from engine.records.trace import StepRecord, Trace
from engine.records.trace_meta import TraceMeta


def _refused(self, *args, **kwargs):
    raise TypeError(f"a shared {type(self).__bases__[0].__name__} is read-only: copy it to change it")


class FrozenDict(dict):
    """A dict no one can change (its copies are plain dicts)."""
    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _refused

    def __reduce__(self):
        return dict, (dict(self),)


class FrozenList(list):
    """A list no one can change (its copies are plain lists)."""
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = sort = reverse = _refused
    __iadd__ = __imul__ = _refused

    def __reduce__(self):
        return list, (list(self),)


def _no_assignment(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field {name!r} of a shared {type(self).__bases__[0].__name__}")


def _no_deletion(self, name):
    raise FrozenInstanceError(f"cannot delete field {name!r} of a shared {type(self).__bases__[0].__name__}")


class FrozenRecord(StepRecord):
    __setattr__, __delattr__ = _no_assignment, _no_deletion


class FrozenMeta(TraceMeta):
    __setattr__, __delattr__ = _no_assignment, _no_deletion


class FrozenTrace(Trace):
    __setattr__, __delattr__ = _no_assignment, _no_deletion


_FROZEN: dict[type, type] = {}      # a dataclass -> its frozen subclass


def _thawed(cls: type, state: dict):
    """A plain ``cls`` with these field values: what a frozen dataclass instance copies and pickles as."""
    obj = cls.__new__(cls)
    for name, value in state.items():
        object.__setattr__(obj, name, value)
    return obj


def _as_plain(self):
    return _thawed, (type(self).__bases__[0], {f.name: getattr(self, f.name) for f in fields(self)})


def _frozen_class(cls: type) -> type:
    if cls not in _FROZEN:              # no __slots__ of its own: an instance's layout stays its class's
        _FROZEN[cls] = type(f"Frozen{cls.__name__}", (cls,), dict(
            __slots__=(), __setattr__=_no_assignment, __delattr__=_no_deletion, __reduce__=_as_plain))
    return _FROZEN[cls]


def frozen_value(value):
    """``value`` read-only all the way down: arrays a read-only view, dicts, lists, tuples and dataclass instances
    frozen (a copy of each)."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
        return value.view()
    if isinstance(value, dict):
        return FrozenDict({k: frozen_value(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(frozen_value(v) for v in value)
    if isinstance(value, tuple):
        items = [frozen_value(v) for v in value]
        return type(value)._make(items) if hasattr(value, "_fields") else tuple(items)
    if not is_dataclass(value) or isinstance(value, type) or type(value).__setattr__ is _no_assignment:
        return value
    if type(value).__dataclass_params__.frozen:     # refuses assignment already: the same class, equal and hashed
        return replace(value, **{f.name: frozen_value(getattr(value, f.name)) for f in fields(value) if f.init})
    obj = _thawed(type(value), {f.name: frozen_value(getattr(value, f.name)) for f in fields(value)})
    object.__setattr__(obj, "__class__", _frozen_class(type(value)))
    return obj


def _freeze_fields(obj, cls) -> None:
    for name, value in vars(obj).items():
        object.__setattr__(obj, name, frozen_value(value))
    object.__setattr__(obj, "__class__", cls)


def freeze(trace: Trace) -> Trace:
    """The trace, made read-only in place (and returned): see the module's docstring."""
    for r in trace.records:
        _freeze_fields(r, FrozenRecord)
    _freeze_fields(trace.meta, FrozenMeta)
    object.__setattr__(trace, "records", tuple(trace.records))
    object.__setattr__(trace, "__class__", FrozenTrace)
    return trace
