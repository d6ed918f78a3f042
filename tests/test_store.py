"""TraceStore: canonical keys, bytes-only storage, corruption detected and dropped, size limit."""

import pickle
import sqlite3
import time

import pytest

from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from explorer.store import TraceStore, canonical_key


@pytest.fixture(scope="module")
def trace(adapter):
    return Generation(adapter, "Olga has 9 eggs . How many eggs are there now ?",
                      build_decoder("threshold", block_size=4, gen_length=12)).run()


def test_canonical_key():
    a = canonical_key(model="m", params={"tau": 0.9, "block_size": 8}, prompt="p")
    b = canonical_key(prompt="p", params={"block_size": 8, "tau": 0.9}, model="m")
    assert a == b and len(a) == 64
    assert a != canonical_key(model="m", params={"tau": 0.91, "block_size": 8}, prompt="p")


def test_roundtrip_and_corruption(tmp_path, trace):
    store = TraceStore(str(tmp_path / "c"))
    key = canonical_key(x=1)
    assert store.get(key) is None
    store.put(key, trace)
    back = store.get(key)
    assert back.meta.token_ids == trace.meta.token_ids and len(back.records) == len(trace.records)
    # flip a byte of the stored value: detected, dropped, reported as a miss
    raw = bytearray(store.cache.get(key))
    raw[len(raw) // 2] ^= 0xFF
    store.cache.set(key, bytes(raw))
    assert store.get(key) is None and key not in store.cache
    store.close()


def test_refuses_pickled_rows(tmp_path, trace):
    store = TraceStore(str(tmp_path / "p"))
    key = canonical_key(x=2)
    store.put(key, trace)
    store.close()
    db = sqlite3.connect(str(tmp_path / "p" / "cache.db"))
    db.execute("UPDATE Cache SET mode = 4, value = ? WHERE key = ?", (pickle.dumps({"evil": 1}), key))
    db.commit()
    db.close()
    store = TraceStore(str(tmp_path / "p"))
    assert store.get(key) is None           # refused, not unpickled
    with pytest.raises(TypeError):
        store.cache.set(key, {"not": "bytes"})
    store.close()


def test_size_limit(tmp_path, trace):
    store = TraceStore(str(tmp_path / "s"), size_limit=200_000)
    for i in range(60):
        store.put(canonical_key(i=i), trace)
    assert store.cache.volume() < 600_000 and len(store) < 60
    store.close()


def test_valid_checksum_over_garbage_is_dropped(tmp_path, trace):
    import hashlib
    store = TraceStore(str(tmp_path / "g"))
    key = canonical_key(x=3)
    garbage = b"PK\x03\x04 not really a zip"
    store.cache.set(key, hashlib.sha256(garbage).digest() + garbage)
    assert store.get(key) is None and key not in store.cache          # dropped, so the next read recomputes
    store.close()


def test_corrupt_database_is_rebuilt_and_private(tmp_path, trace, caplog):
    d = tmp_path / "db"
    d.mkdir()
    (d / "cache.db").write_bytes(b"this is not an sqlite database" * 100)
    store = TraceStore(str(d))                                          # starts instead of failing
    assert "rebuilt" in caplog.text
    store.put(canonical_key(x=4), trace)
    assert store.get(canonical_key(x=4)) is not None
    assert (d.stat().st_mode & 0o777) == 0o700 and ((d / "cache.db").stat().st_mode & 0o777) == 0o600
    assert list(tmp_path.glob("db.corrupt-*"))
    store.close()


def test_tampered_row_touches_no_outside_file(tmp_path, trace):
    outside = tmp_path / "x"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("keep me")
    store = TraceStore(str(tmp_path / "cache" / "c"))
    key = canonical_key(x=3)
    store.put(key, trace)
    db = sqlite3.connect(str(tmp_path / "cache" / "c" / "cache.db"))
    db.execute("UPDATE Cache SET mode=2, filename='../../x/victim.txt', value=NULL")
    db.commit()
    db.close()
    assert store.get(key) is None                          # refused, reported as a miss
    assert victim.read_text() == "keep me"                 # neither read into a trace nor deleted
    store.put(key, trace)                                  # and the key works again
    assert store.get(key) is not None
    store.close()


def test_a_row_copied_under_another_key_is_a_miss(tmp_path, adapter, trace):
    other = Generation(adapter, "Ann has 3 pens . How many pens does she have now ?",
                       build_decoder("threshold", block_size=4, gen_length=12)).run()
    store = TraceStore(str(tmp_path / "c"))
    a, b = canonical_key(p="A"), canonical_key(p="B")
    store.put(a, trace)
    store.put(b, other)
    store.cache.set(a, store.cache.get(b))                 # B's bytes in A's row
    assert store.get(a) is None
    assert store.get(b).meta.token_ids == other.meta.token_ids
    store.close()


def test_value_files_are_private(tmp_path, trace):
    root = tmp_path / "c"
    store = TraceStore(str(root))
    store.cache.reset("disk_min_file_size", 1024)          # store this small trace as a file, as a big one would be
    store.put(canonical_key(x=9), trace)
    files = [p for p in root.rglob("*.val")]
    assert files, "the trace should be large enough to be stored as a file"
    for f in files:
        assert f.stat().st_mode & 0o777 == 0o600
        assert f.parent.stat().st_mode & 0o777 == 0o700 and f.parent.parent.stat().st_mode & 0o777 == 0o700
    store.close()


# ---- round three: links, text, size, inflation, the secret ----------------------------------------------------
def _value_file(store, key):
    db = sqlite3.connect(str(store.cache.directory) + "/cache.db")
    row = db.execute("SELECT filename FROM Cache WHERE key = ?", (key,)).fetchone()
    db.close()
    return row[0]


def test_start_up_follows_no_symlink(tmp_path, trace):
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    outside.chmod(0o644)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "link").symlink_to(outside)
    TraceStore(str(tmp_path / "c")).close()
    assert outside.stat().st_mode & 0o777 == 0o644          # its mode is untouched


def test_a_planted_folder_link_sends_no_value_outside(tmp_path, trace):
    import os
    store = TraceStore(str(tmp_path / "c"), size_limit=2**30)
    store.cache.disk.min_file_size = 0                      # every value in a file of its own
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for a in "0123456789abcdef":                            # every first-level folder diskcache may pick
        for b in "0123456789abcdef":
            name = tmp_path / "c" / (a + b)
            if not name.exists():
                name.symlink_to(elsewhere)
    with pytest.raises(OSError):
        store.put(canonical_key(x=7), trace)
    assert list(os.scandir(elsewhere)) == []
    store.close()


def test_a_value_file_swapped_for_a_link_is_a_miss_and_dropped(tmp_path, trace):
    store = TraceStore(str(tmp_path / "c"))
    store.cache.disk.min_file_size = 0
    key = canonical_key(x=8)
    store.put(key, trace)
    f = tmp_path / "c" / _value_file(store, key)
    target = tmp_path / "secretish"
    target.write_bytes(f.read_bytes())
    f.unlink()
    f.symlink_to(target)
    assert store.get(key) is None and key not in store.cache
    assert target.exists()                                 # the link is dropped, not what it points at
    store.close()


def test_text_values_are_a_miss_and_dropped(tmp_path, trace):
    store = TraceStore(str(tmp_path / "t"))
    key, key2 = canonical_key(x=3), canonical_key(x=4)
    store.put(key, trace)
    store.put(key2, trace)
    store.close()
    db = sqlite3.connect(str(tmp_path / "t" / "cache.db"))
    db.execute("UPDATE Cache SET mode = 1, value = ?, filename = NULL WHERE key = ?", ("text, not bytes", key))
    db.execute("UPDATE Cache SET mode = 3 WHERE key = ?", (key2,))      # a value file read in text mode
    db.commit()
    db.close()
    store = TraceStore(str(tmp_path / "t"))
    assert store.get(key) is None and key not in store.cache
    assert store.get(key2) is None and key2 not in store.cache
    store.close()


def test_oversized_and_inflating_values_are_misses(tmp_path, trace, monkeypatch):
    import io
    import zipfile

    from explorer import store as store_mod
    store = TraceStore(str(tmp_path / "z"))
    key = canonical_key(x=5)
    store.put(key, trace)
    monkeypatch.setattr(store_mod, "MAX_VALUE", 1000)       # this trace's value is larger than that
    assert store.get(key) is None and key not in store.cache
    monkeypatch.undo()
    bomb = io.BytesIO()                                     # 200 KB of zeros that inflate to 512 MB
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("meta.npy", "w", force_zip64=True) as f:
            for _ in range(512):
                f.write(bytes(2**20))
    payload = bomb.getvalue()
    key = canonical_key(x=6)
    store.cache.set(key, store_mod.checksum(store.secret, key, payload) + payload)   # signed, yet a bomb
    assert store.get(key) is None and key not in store.cache
    store.close()


def test_a_row_signed_without_the_secret_is_refused(tmp_path, trace):
    import hashlib
    store = TraceStore(str(tmp_path / "h"))
    key = canonical_key(x=9)
    payload = trace.to_bytes()
    forged = hashlib.sha256(key.encode() + b"\0" + payload).digest()      # the old, keyless checksum
    store.cache.set(key, forged + payload)
    assert store.get(key) is None
    secret = tmp_path / "h.key"
    assert secret.stat().st_mode & 0o777 == 0o600 and len(secret.read_bytes()) == 32
    assert TraceStore(str(tmp_path / "h")).secret == store.secret        # the same install keeps its secret
    store.close()


WRITER = """
import sys, time
from explorer.store import TraceStore
store = TraceStore(sys.argv[1])
tag, n = sys.argv[2], int(sys.argv[3])
for i in range(n):
    store.cache.set(f"{tag}-{i}", b"x" * 64)
    time.sleep(0.002)
"""


def test_two_processes_writing_through_one_cache_lose_nothing(tmp_path):
    """Two app workers sharing UNMASK_CACHE_DIR: one starts while the other writes, and both write on. Every row
    is there afterwards (opening the store must not drop the other's SQLite locks and delete its live WAL)."""
    import subprocess
    import sys
    from pathlib import Path as P
    from explorer.store import TraceStore
    folder = str(tmp_path / "cache")
    TraceStore(folder)
    root = P(__file__).resolve().parent.parent
    a = subprocess.Popen([sys.executable, "-c", WRITER, folder, "a", "300"], cwd=root)
    time.sleep(0.3)
    for k in range(3):                                    # workers that start, write a little and stop
        subprocess.run([sys.executable, "-c", WRITER, folder, f"b{k}", "5"], cwd=root, check=True)
    assert a.wait(timeout=120) == 0
    store = TraceStore(folder)
    keys = set(store.cache.iterkeys())
    missing = [f"a-{i}" for i in range(300) if f"a-{i}" not in keys]
    assert not missing and all(f"b{k}-{i}" in keys for k in range(3) for i in range(5)), missing[:5]
