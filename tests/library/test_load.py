"""Issue 36, the library under load and faults, kept as tests: processes saving at once
(same and distinct names) lose no write, and a writer killed mid-save (`kill -9`) loses
nothing and leaves the database intact, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from library import open_library
from library.entries import content_hash
from library.kinds import save_profile
from tests.library.test_store import PROFILE, ROOT

WORKER = """
import json, sys
from library import NameTaken, open_library
from library.kinds import save_scenario
url, worker, ops, shared = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
lib, kept = open_library(url), []
for i in range(ops):
    name = f"shared {i}" if shared else f"w{worker} {i}"
    try:
        saved = save_scenario(lib, name, "roi", {"worker": worker, "i": str(i)}, who=f"w{worker}")
    except NameTaken:
        continue
    kept.append(saved.entry.name)
print(json.dumps(kept))
"""
WRITER = """
import os, sys
from library import open_library
from library.kinds import save_benchmark
lib = open_library(sys.argv[1])
print("ready", flush=True)
for i in range(10_000):
    blob = os.urandom(256 * 1024)
    save_benchmark(lib, f"run {sys.argv[2]} {i}", blob, device="H100", engine="vllm",
                   engine_version="1")
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "SPECPLAN_USER": "load"}


def _workers(url: str, n: int, ops: int, shared: bool) -> list[list[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, str(w), str(ops), "1" if shared else "0"],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(n)
    ]
    out = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in out]
    return [json.loads(o) for o, _ in out]


@pytest.mark.parametrize("shared", [False, True], ids=["distinct names", "same names"])
def test_processes_saving_at_once_lose_no_write(db_url, shared):
    kept = _workers(db_url, 4, 25, shared)
    lib = open_library(db_url)
    entries = {e.name: e for e in lib.entries("scenario")}
    said = [name for names in kept for name in names]
    assert sorted(said) == sorted(entries), "a save reported kept is missing, or one more"
    assert len(entries) == (25 if shared else 100)
    for e in entries.values():
        assert content_hash(lib.content("scenario", e.name)) == e.content_hash
    lib.close()


def _intact(lib, before: bytes) -> None:
    """Every entry's bytes match its hash and size; the one kept before is as it was."""
    assert lib.content("profile", "kept") == before
    for e in lib.entries():
        content = lib.content(e.kind, e.name)
        assert (content_hash(content), len(content)) == (e.content_hash, e.size_bytes), e.name
    if lib.engine.dialect.name == "sqlite":
        with lib.engine.connect() as c:
            assert c.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"


def test_a_writer_killed_mid_save_loses_nothing(db_url):
    lib = open_library(db_url)
    save_profile(lib, "kept", PROFILE.read_bytes())
    for kill in range(3):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, db_url, str(kill)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert writer.stdout.readline().strip() == b"ready"
        time.sleep(0.05 + 0.07 * kill)
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        _intact(lib, PROFILE.read_bytes())
    assert len(lib.entries("benchmark")) > 0
    lib.close()
