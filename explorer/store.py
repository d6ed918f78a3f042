"""TraceStore: decoded traces cached on disk under a canonical sha256 key, stored as bytes, never pickled.

diskcache pickles any value that is not bytes/str, and unpickles whatever a tampered database says is a pickle
(CVE-2025-69872). ``BytesOnlyDisk`` refuses both: keys must be str, values bytes, and a pickled row is an error.
Each value is ``sha256(payload) || payload`` with payload = the trace's npz (arrays + JSON metadata); an entry that
fails the checksum or does not parse is dropped and reported as a miss, so the caller recomputes it.
"""

from __future__ import annotations

import hashlib
import json
import logging

import diskcache

from engine.trace import Trace

log = logging.getLogger(__name__)


class BytesOnlyDisk(diskcache.Disk):
    def put(self, key):
        if type(key) is not str:
            raise TypeError("TraceStore keys are str")
        return super().put(key)

    def get(self, key, raw):
        if not raw:
            raise ValueError("refusing to unpickle a cache key")
        return super().get(key, raw)

    def store(self, value, read, key=diskcache.core.UNKNOWN):
        if type(value) is not bytes:
            raise TypeError("TraceStore values are bytes")
        return super().store(value, read, key=key)

    def fetch(self, mode, filename, value, read):
        if mode == diskcache.core.MODE_PICKLE:
            raise ValueError("refusing to unpickle a cache value")
        return super().fetch(mode, filename, value, read)


def canonical_key(**fields) -> str:
    """sha256 of the fields as canonical JSON (sorted keys, no whitespace): same inputs, same key."""
    blob = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class TraceStore:
    def __init__(self, directory: str, size_limit: int = 256 * 2**20):
        self.cache = diskcache.Cache(directory, size_limit=size_limit, disk=BytesOnlyDisk,
                                     eviction_policy="least-recently-used")

    def get(self, key: str) -> Trace | None:
        try:
            blob = self.cache.get(key)
        except (ValueError, OSError) as e:
            log.warning("trace cache entry %s unreadable (%s); dropped", key[:12], e)
            self.cache.delete(key)
            return None
        if blob is None:
            return None
        digest, payload = blob[:32], blob[32:]
        try:
            if hashlib.sha256(payload).digest() != digest:
                raise ValueError("checksum mismatch")
            return Trace.from_bytes(payload)
        except (ValueError, KeyError, OSError) as e:  # corrupt npz/JSON: recompute rather than fail the user
            log.warning("trace cache entry %s corrupt (%s); dropped", key[:12], e)
            self.cache.delete(key)
            return None

    def put(self, key: str, trace: Trace) -> None:
        payload = trace.to_bytes()
        self.cache.set(key, hashlib.sha256(payload).digest() + payload)

    def __len__(self) -> int:
        return len(self.cache)

    def close(self) -> None:
        self.cache.close()
