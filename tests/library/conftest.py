"""The library's tests run on both databases: an SQLite file, and a throwaway PostgreSQL
cluster (initdb + pg_ctl on 127.0.0.1, a free port, a temporary folder) started once per
test session from the distribution's packages.

Where PostgreSQL is not installed the tests run on SQLite alone and one test
(test_postgresql.py) is skipped with the reason; under CI (CI set, as .ci/run sets it)
every PostgreSQL case fails instead, so CI never passes without it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

PG_USER = "specplan"
SKIP_REASON = (
    "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/pg_ctl; apt-get install "
    "postgresql): the library's storage tests ran on SQLite only"
)


def _pg_bin() -> Path | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[4])
    )
    if found:
        return Path(found[-1]).parent
    which = shutil.which("pg_ctl")
    found = Path(which).resolve().parent if which else None
    return found if found and (found / "initdb").exists() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_owner(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: CI runs as root, so run it as `postgres`."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


@pytest.fixture(scope="session")
def pg_cluster():
    """(admin URL, bin folder) of a PostgreSQL cluster that lives for the test session."""
    bin_dir = _pg_bin()
    if bin_dir is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set and " + SKIP_REASON.replace("ran on SQLite only", "must run"))
        pytest.skip(SKIP_REASON)
    root = Path(tempfile.mkdtemp(prefix="specplan-pg-"))
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(root, owner.pw_uid, owner.pw_gid)
    data, port = root / "data", _free_port()
    run = {"check": True, "capture_output": True, "text": True, "cwd": root}
    subprocess.run(
        _as_owner(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                PG_USER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ]
        ),
        **run,
    )
    options = f"-h 127.0.0.1 -p {port} -k {root} -F -c max_connections=200"
    subprocess.run(
        _as_owner(
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(root / "log"),
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            ]
        ),
        **run,
    )
    try:
        yield f"postgresql+psycopg://{PG_USER}@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            _as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def _pg_database(admin_url: str):
    from sqlalchemy import create_engine, text

    name = "t_" + uuid.uuid4().hex[:12]
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


BACKENDS = ["sqlite", "postgresql"] if _pg_bin() or os.environ.get("CI") else ["sqlite"]


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path):
    """A fresh, empty database URL: an SQLite file, then a new PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'library.db'}"
        return
    with _pg_database(request.getfixturevalue("pg_cluster")) as url:
        yield url


@pytest.fixture
def lib(db_url):
    from library import open_library

    library = open_library(db_url)
    yield library
    library.close()
