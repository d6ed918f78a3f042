"""TraceStore: decoded traces cached on disk under a canonical sha256 key, stored as bytes, never pickled.

diskcache pickles any value that is not bytes/str, and unpickles whatever a tampered database says is a pickle
(CVE-2025-69872). ``BytesOnlyDisk`` refuses both: keys must be str, values bytes, and a pickled row is an error.
A tampered row may also name a file outside the cache (``filename = '../../x'``), which diskcache would read and,
on a failed checksum, delete: ``BytesOnlyDisk`` reads and removes only paths that resolve inside the cache
directory, and writes value files 0600 in 0700 folders.
Each value is ``sha256(key || payload) || payload`` with payload = the trace's npz (arrays + JSON metadata), so a
row copied under another key fails too; an entry that fails the checksum or does not parse is dropped and reported
as a miss, so the caller recomputes it.
"""

from __future__ import annotations

import contextlib
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
        if filename is not None and not self.inside(filename):
            raise ValueError("cache row names a file outside the cache directory")
        return super().fetch(mode, filename, value, read)

    def remove(self, file_path):
        if not self.inside(file_path):
            log.warning("trace cache: refused to remove %r, outside the cache directory", str(file_path)[:80])
            return
        super().remove(file_path)

    def inside(self, filename) -> bool:
        """Whether `filename` (a row's relative path) resolves to a file strictly inside the cache directory."""
        root = os.path.realpath(self._directory)
        try:
            full = os.path.realpath(os.path.join(root, filename))
        except (TypeError, ValueError):   # not a path at all (an int, a NUL byte)
            return False
        return full != root and os.path.commonpath([root, full]) == root

    def _write(self, full_path, iterator, mode, encoding=None):
        """Value files are visitors' prompts: create them 0600 in 0700 folders (diskcache's own write uses the
        process umask, 0644 / 0755 by default)."""
        if mode != "xb":
            raise TypeError("TraceStore writes bytes only")
        sub = os.path.dirname(full_path)
        for d in (os.path.dirname(sub), sub):
            with contextlib.suppress(FileExistsError):
                os.mkdir(d, 0o700)
        fd = os.open(full_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        size = 0
        with os.fdopen(fd, "wb") as writer:
            for chunk in iterator:
                size += len(chunk)
                writer.write(chunk)
        return size


def canonical_key(**fields) -> str:
    """sha256 of the fields as canonical JSON (sorted keys, no whitespace): same inputs, same key."""
    blob = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def checksum(key: str, payload: bytes) -> bytes:
    """sha256(key || NUL || payload): binds a value to the key it was stored under."""
    return hashlib.sha256(key.encode() + b"\0" + payload).digest()


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
            if checksum(key, payload) != digest:
                raise TraceFormatError("checksum mismatch")
            return Trace.from_bytes(payload)
        except TraceFormatError as e:  # corrupt entry: drop it and recompute rather than fail the visitor
            log.warning("trace cache entry %s corrupt (%s); dropped", key[:12], e)
            self.cache.delete(key)
            return None

    def put(self, key: str, trace: Trace) -> None:
        payload = trace.to_bytes()
        self.cache.set(key, checksum(key, payload) + payload)

    def __len__(self) -> int:
        return len(self.cache)

    def close(self) -> None:
        self.cache.close()
