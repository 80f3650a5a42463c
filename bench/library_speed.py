"""The library's speed, in one run: listing 10,000 kept profiles the way the Profiles page
does, and saving a 1 MB profile on SQLite.

Prints, each the median of `--repeats` runs:
- the Profiles page's library path with 10,000 profiles kept: the query (every column but
  the content, newest first) and the table the page shows (`Library.table`, `app.library_ui.listing_frame`),
  and the same with a search that matches a tenth of them;
- the query that tells whether the list changed (`Library.table_version`): a rerun with
  nothing changed reads only that, and the page keeps the table it read (st.cache_data);
- the whole Profiles page (Streamlit AppTest, script time) with 10,000 kept and with none:
  the difference is what the library adds to a rerun;
- saving a 1 MB profile: `Library.save` alone (hash, checks, one transaction) and
  `library.kinds.save_profile` (the profile parsed and checked first, as the page does).

The 10,000 rows are inserted in one transaction (setup, not timed). `--url` runs the
listing on another database (e.g. a PostgreSQL URL); the save is always timed on SQLite.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from library.entries import content_hash  # noqa: E402
from library.schema import Entry  # noqa: E402
from library.store import open_library  # noqa: E402

PROFILE = ROOT / "data" / "profiles" / "cpu" / "tiny.json"
DEVICES = ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA B200", "NVIDIA L40S", "AMD EPYC")
MODELS = ("llama-3.1-8b", "llama-3.3-70b", "qwen3-32b", "llama-3.2-1b")


def _median_ms(fn, repeats: int) -> str:
    """'wall ms (CPU ms)', medians: on a shared machine the CPU time is the steadier."""
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return f"{1000 * statistics.median(wall):7.1f} ms ({1000 * statistics.median(cpu):6.1f} ms CPU)"


def fill(lib, n: int) -> None:
    """n profile entries with varied device, model and notes (small distinct contents)."""
    now = datetime.now(UTC)
    rows = []
    for i in range(n):
        content = f'{{"bench": {i}}}'.encode()
        rows.append(
            {
                "kind": "profile",
                "name": f"profile {i:05d}",
                "notes": f"nightly run {i % 97}",
                "created_by": f"user{i % 13}",
                "created_at": now - timedelta(minutes=i),
                "content_hash": content_hash(content),
                "size_bytes": len(content),
                "content": content,
                "device": DEVICES[i % len(DEVICES)],
                "model": MODELS[i % len(MODELS)],
                "engine": "",
                "engine_version": "",
                "model_version": "",
                "facts": {"kind": "cuda", "measurements": 200},
            }
        )
    with lib.engine.begin() as c:
        c.execute(Entry.__table__.insert(), rows)


def one_megabyte_profile() -> bytes:
    """A valid profile of about 1 MB: the bundled tiny profile with a long model note."""
    doc = json.loads(PROFILE.read_bytes())
    size = len(json.dumps(doc))
    doc["models"][0]["notes"] = "x" * (1_000_000 - size)
    return json.dumps(doc).encode()


def page_ms(url: str, repeats: int) -> str:
    import os

    from streamlit.testing.v1 import AppTest

    os.environ["SPECPLAN_DB_URL"] = url
    at = AppTest.from_file(str(ROOT / "app" / "streamlit_app.py"), default_timeout=120)
    at.switch_page("views/profiles.py")
    at.run()  # imports and caches, as a server that has been up a while

    def rerun():
        at.run()
        assert not at.exception, [e.value for e in at.exception]

    return _median_ms(rerun, repeats)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--url", help="database for the listing (default: a new SQLite file)")
    args = ap.parse_args()
    from app.library_ui import listing_frame

    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        lib = open_library(url)
        fill(lib, args.n)
        kinds = ("profile", "benchmark")
        listed = _median_ms(lambda: listing_frame(lib.table(kinds)), args.repeats)
        searched = _median_ms(lambda: listing_frame(lib.table(kinds, "h200")), args.repeats)
        version = _median_ms(lambda: lib.table_version(kinds), args.repeats)
        rows = len(lib.table(kinds, "h200"))
        print(f"{args.n:,} kept profiles on {lib.where.split(':')[0]}")
        print(f"  read and tabled (after any change):  {listed}")
        print(f"  same, search 'h200' ({rows:,} rows):   {searched}")
        print(f"  has it changed? (table_version):     {version}")
        full = page_ms(url, args.repeats)
        empty = page_ms(f"sqlite:///{Path(tmp) / 'empty.db'}", args.repeats)
        print(f"  Profiles page rerun, {args.n:,} kept:   {full} script time")
        print(f"  Profiles page rerun, none kept:      {empty} script time")

        data = one_megabyte_profile()
        sqlite = open_library(f"sqlite:///{Path(tmp) / 'save.db'}")
        from library.kinds import save_profile

        counter = iter(range(10**6))

        def raw_save():
            blob = data + b" " * next(counter)  # a new hash each time: a real insert
            sqlite.save("benchmark", f"b{len(blob)}", blob, device="d", engine="e")

        def parsed_save():
            i = next(counter)
            save_profile(sqlite, f"p{i}", data.replace(b'"x', b'"' + str(i).encode(), 1))

        print(f"saving a {len(data) / 1e6:.2f} MB profile on SQLite")
        raw, parsed = _median_ms(raw_save, args.repeats), _median_ms(parsed_save, args.repeats)
        print(f"  Library.save (hash, checks, one transaction): {raw}")
        print(f"  save_profile (parsed and checked first):      {parsed}")


if __name__ == "__main__":
    main()
