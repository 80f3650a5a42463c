"""The dashboard served for a browser test: `streamlit run` on a free 127.0.0.1 port,
waited for until healthy, stopped on exit; and the check that Chromium and Playwright are
there (a skip without them, a failure under CI)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "app" / "streamlit_app.py"
CHROMIUM = "/usr/bin/chromium"


def require_browser() -> None:
    missing = []
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        missing.append(f"Chromium ({CHROMIUM}; apt-get install -y chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright Python package")
    if missing:
        message = "browser test needs " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message + " (CI is set: .ci/run installs Chromium)")
        pytest.skip(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(log_path: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """The app's URL while `python -m streamlit run` serves it, with `env` added to the
    environment; its output is appended to `log_path`, shown if it does not start."""
    port = free_port()
    args = [sys.executable, "-m", "streamlit", "run", str(ENTRY), "--server.headless", "true"]
    args += ["--server.address", "127.0.0.1", "--server.port", str(port)]
    args += ["--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"]
    args += ["--client.toolbarMode", "viewer"]
    with open(log_path, "a") as log:
        proc = subprocess.Popen(
            args,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                        if r.read() == b"ok":
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"Streamlit did not start; log:\n{log_path.read_text()}")
                time.sleep(0.3)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
