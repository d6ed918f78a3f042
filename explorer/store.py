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
import os
import shutil
import sqlite3
import time
from pathlib import Path

import diskcache

from engine.trace import Trace, TraceFormatError

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
    """Prompts are visitors' data: the directory is created 0700 and its files 0600. A database that cannot be
    opened is moved aside and rebuilt (with a log line) rather than stopping the app."""

    def __init__(self, directory: str, size_limit: int = 256 * 2**20):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
        try:
            self.cache = self._open(directory, size_limit)
        except sqlite3.DatabaseError as e:
            aside = f"{directory.rstrip('/')}.corrupt-{int(time.time())}"
            log.warning("trace cache at %s unreadable (%s); moved to %s and rebuilt", directory, e, aside)
            shutil.move(directory, aside)
            os.makedirs(directory, mode=0o700)
            self.cache = self._open(directory, size_limit)
        for f in Path(directory).iterdir():
            if f.is_file():
                f.chmod(0o600)

    @staticmethod
    def _open(directory: str, size_limit: int) -> diskcache.Cache:
        cache = diskcache.Cache(directory, size_limit=size_limit, disk=BytesOnlyDisk,
                                eviction_policy="least-recently-used")
        len(cache)  # touches the database: a corrupt file fails here, not on a visitor's request
        return cache

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
                raise TraceFormatError("checksum mismatch")
            return Trace.from_bytes(payload)
        except TraceFormatError as e:  # corrupt entry: drop it and recompute rather than fail the visitor
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
