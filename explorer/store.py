"""TraceStore: decoded traces cached on disk under a canonical sha256 key, stored as bytes, never pickled.

diskcache pickles any value that is not bytes/str, and unpickles whatever a tampered database says is a pickle
(CVE-2025-69872). ``BytesOnlyDisk`` refuses both: keys must be str, values bytes, and a pickled row is an error.
A tampered row may also name a file outside the cache (``filename = '../../x'``), which diskcache would read and,
on a failed checksum, delete: ``BytesOnlyDisk`` reads and removes only paths that resolve inside the cache
directory, and writes value files 0600 in 0700 folders.
Each value is ``HMAC-SHA256(secret, key || payload) || payload`` with payload = the trace's npz (arrays + JSON
metadata) and a per-install secret kept outside the cache folder (created 0600 on first start), so a row copied
under another key, or signed by whoever can write the cache but not read the secret, fails; an entry that fails the
check, is not bytes, is larger than ``MAX_VALUE`` or inflates past the trace cap, or does not parse is dropped and
reported as a miss, so the caller recomputes it. Nothing in the cache folder is followed through a symlink.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import shutil
import sqlite3
import stat
import time
from pathlib import Path

import diskcache

from engine.records.trace import Trace, TraceFormatError

log = logging.getLogger(__name__)
MAX_VALUE = 64 * 2**20          # bytes of one stored value (a long trace's npz is a few MiB)


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
        if mode == diskcache.core.MODE_TEXT:
            raise ValueError("cache value is text, not bytes")
        if filename is not None:
            if not self.inside(filename):
                raise ValueError("cache row names a file outside the cache directory")
            st = os.lstat(os.path.join(self._directory, filename))      # the link itself, never its target
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_VALUE:
                raise ValueError("cache value file is a link, not a file, or too large")
            if mode == diskcache.core.MODE_BINARY and not read:      # diskcache opens it by name: read it here,
                fd = os.open(os.path.join(self._directory, filename), os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as f:                       # without following a link swapped in since
                    return f.read(MAX_VALUE + 1)
        elif isinstance(value, (bytes, str)) and len(value) > MAX_VALUE:
            raise ValueError("cache value too large")
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
            if not stat.S_ISDIR(os.lstat(d).st_mode):      # a planted link would send the file elsewhere
                raise OSError(f"cache folder {os.path.basename(d)!r} is not a directory")
        fd = os.open(full_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
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


def checksum(secret: bytes, key: str, payload: bytes) -> bytes:
    """HMAC-SHA256(secret, key || NUL || payload): binds a value to its key and to this install."""
    return hmac.new(secret, key.encode() + b"\0" + payload, hashlib.sha256).digest()


def install_secret(path: Path) -> bytes:
    """The install's signing secret: 32 random bytes in a 0600 file, created on first start; never a link."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
    except FileExistsError:
        pass
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{path} is not a file")
        secret = f.read(64)
    if len(secret) < 32:
        raise OSError(f"{path}: the cache secret is shorter than 32 bytes")
    return secret


def private_files(directory: str) -> None:
    """Existing files of the folder 0600, through a descriptor that follows no link (before the database opens)."""
    for f in Path(directory).iterdir():
        with contextlib.suppress(OSError):
            fd = os.open(f, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    os.fchmod(fd, 0o600)
            finally:
                os.close(fd)


class TraceStore:
    """Prompts are visitors' data: the directory is created 0700 and its files 0600. A database that cannot be
    opened is moved aside and rebuilt (with a log line) rather than stopping the app."""

    def __init__(self, directory: str, size_limit: int = 256 * 2**20, secret_file: str | None = None):
        """``secret_file``: where the signing secret lives, outside the cache folder (default: beside it)."""
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if os.path.islink(directory.rstrip("/")):
            raise OSError(f"the trace cache {directory} is a symlink")
        os.chmod(directory, 0o700)
        self.secret = install_secret(Path(secret_file or directory.rstrip("/") + ".key"))
        # Permissions before the database is opened: closing any descriptor of cache.db or its -wal / -shm drops
        # every POSIX lock this process holds on them, so a later loop would let another process delete the live
        # WAL. New files are made 0600 by the umask while the database opens.
        private_files(directory)
        old = os.umask(0o077)
        try:
            self.cache = self._open(directory, size_limit)
        except sqlite3.DatabaseError as e:
            aside = f"{directory.rstrip('/')}.corrupt-{int(time.time())}"
            log.warning("trace cache at %s unreadable (%s); moved to %s and rebuilt", directory, e, aside)
            shutil.move(directory, aside)
            os.makedirs(directory, mode=0o700)
            self.cache = self._open(directory, size_limit)
        finally:
            os.umask(old)

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
        try:
            if type(blob) is not bytes:
                raise TraceFormatError(f"value is {type(blob).__name__}, not bytes")
            if len(blob) > MAX_VALUE:
                raise TraceFormatError("value too large")
            digest, payload = blob[:32], blob[32:]
            if not hmac.compare_digest(checksum(self.secret, key, payload), digest):
                raise TraceFormatError("signature mismatch")
            return Trace.from_bytes(payload)
        except TraceFormatError as e:  # corrupt entry: drop it and recompute rather than fail the visitor
            log.warning("trace cache entry %s corrupt (%s); dropped", key[:12], e)
            self.cache.delete(key)
            return None

    def put(self, key: str, trace: Trace) -> None:
        payload = trace.to_bytes()
        self.cache.set(key, checksum(self.secret, key, payload) + payload)

    def __len__(self) -> int:
        return len(self.cache)

    def close(self) -> None:
        self.cache.close()
