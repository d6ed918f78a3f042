"""Exact block-level KV cache around ``DynamicCache``: keep what is committed, roll back everything else.

Rollback uses the portable negative ``crop``: on transformers 5.2x ``crop(n)`` accepts only n <= 0 (a positive n
raises) and on 5.0 ``crop(0)`` empties the cache, so we only ever call ``crop(-k)`` with k > 0.
Under block-causal attention a committed block's K/V depend only on earlier blocks, so caching is exact.
"""

from __future__ import annotations

from transformers import DynamicCache


class BlockCache:
    def __init__(self, cache: DynamicCache):
        self.cache = cache

    def __len__(self) -> int:
        return self.cache.get_seq_length()

    def rollback(self, length: int) -> None:
        """Drop every cached position at index >= length."""
        extra = len(self) - length
        if extra > 0:
            self.cache.crop(-extra)
        elif extra < 0:
            raise ValueError(f"cannot roll back to {length}: cache holds only {len(self)}")
