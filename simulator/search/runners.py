"""Where confirming jobs run: in this process, or as Ray tasks.

Both runners offer the same four calls, so the search has one code path: `submit(job)`
returns a handle, `wait(handles)` returns those finished (at least one), `get(handle)` the
`ArmResult`, `cancel(handles)` drops the rest. `RayRunner` starts a local Ray sized to the
machine's cores unless given an address (`--ray-address`, or `RAY_ADDRESS`), and retries a
task whose worker dies (`max_retries`); a task that still fails becomes an `ArmResult`
whose status says so, never a crash of the search.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from simulator.search.confirm import ArmResult, Job, confirm

MAX_RETRIES = 3
"""Times Ray reruns a confirming task whose worker process died."""


def _failed(job: Job, why: str) -> ArmResult:
    return ArmResult(job.arm.key, 0.0, {}, 0, f"failed: {why[:300]}", 0.0)


def _pythonpath(package: str) -> str:
    """PYTHONPATH for local workers: the repository first, then whatever was set."""
    rest = os.environ.get("PYTHONPATH", "")
    return package + (os.pathsep + rest if rest else "")


class InlineRunner:
    """Runs each job in this process, in submission order, when it is waited for."""

    workers = 1

    def __init__(self, fn: Callable[[Job], ArmResult] = confirm):
        self._fn = fn
        self._jobs: dict[int, Job] = {}
        self._done: dict[int, ArmResult] = {}

    def submit(self, job: Job) -> int:
        handle = len(self._jobs)
        self._jobs[handle] = job
        return handle

    def wait(self, handles: list[int]) -> list[int]:
        first = min(handles)
        if first not in self._done:
            job = self._jobs[first]
            try:
                self._done[first] = self._fn(job)
            except Exception as exc:  # as a Ray task's error becomes a failed arm
                self._done[first] = _failed(job, f"{type(exc).__name__}: {exc}")
        return [first]

    def get(self, handle: int) -> ArmResult:
        return self._done[handle]

    def cancel(self, handles: list[int]) -> None:
        for h in handles:
            self._jobs.pop(h, None)

    def close(self) -> None:
        pass


@contextlib.contextmanager
def _deferred_sigint():
    """Hold SIGINT while Ray starts; yields a list that is non-empty if one arrived.

    A KeyboardInterrupt raised inside `ray.init` can land in a fork handler (logging's
    `_releaseLock`), where Python prints "Exception ignored" and drops it: the search then
    ran on as if no Ctrl-C had come. Off the main thread signals cannot be caught, and
    the default behaviour stays."""
    caught: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(True))
    try:
        yield caught
    finally:
        signal.signal(signal.SIGINT, previous)


class RayRunner:
    """Runs each job as a Ray task (`num_cpus=1`, `max_retries`).

    With no running Ray and no address, starts a local one with `num_cpus` (default the
    machine's cores) and stops it on `close`; a Ray already started (a test fixture, a
    notebook) is used as it is and left running."""

    def __init__(
        self,
        address: str | None = None,
        *,
        num_cpus: int | None = None,
        fn: Callable[[Job], ArmResult] = confirm,
        max_retries: int = MAX_RETRIES,
    ):
        import ray

        self._ray = ray
        self._owned = False
        address = address or os.environ.get("RAY_ADDRESS") or None
        if not ray.is_initialized():
            with _deferred_sigint() as interrupted:
                try:
                    self._start(ray, address, num_cpus)
                except KeyboardInterrupt:
                    interrupted.append(True)
            if interrupted:
                ray.shutdown()
                raise KeyboardInterrupt
            self._owned = True
        self._task = ray.remote(num_cpus=1, max_retries=max_retries)(fn)
        self._jobs: dict = {}
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))

    @staticmethod
    def _start(ray, address: str | None, num_cpus: int | None) -> None:
        """Connect to the cluster at `address`, else start a local Ray of `num_cpus`."""
        package = str(Path(__file__).resolve().parents[2])
        if address:
            # Ship the simulator package to the cluster's workers.
            simulator_dir = str(Path(__file__).resolve().parents[1])
            ray.init(
                address=address,
                runtime_env={"py_modules": [simulator_dir], "env_vars": _model_configs()},
                log_to_driver=False,
            )
        else:
            ray.init(
                num_cpus=num_cpus or os.cpu_count() or 1,
                include_dashboard=False,
                runtime_env={"env_vars": {"PYTHONPATH": _pythonpath(package), **_model_configs()}},
                log_to_driver=False,
                configure_logging=False,
            )

    def submit(self, job: Job):
        ref = self._task.remote(job)
        self._jobs[ref] = job
        return ref

    def wait(self, handles: list) -> list:
        ready, _ = self._ray.wait(handles, num_returns=1)
        more, _ = self._ray.wait(handles, num_returns=len(handles), timeout=0)
        return list(dict.fromkeys([*ready, *more]))

    def get(self, handle) -> ArmResult:
        job = self._jobs.pop(handle)
        try:
            return self._ray.get(handle)
        except self._ray.exceptions.RayError as exc:
            return _failed(job, f"{type(exc).__name__}: {exc}")

    def cancel(self, handles: list) -> None:
        for ref in handles:
            # A task that finished meanwhile cannot be cancelled.
            with contextlib.suppress(Exception):
                self._ray.cancel(ref, force=True)
            self._jobs.pop(ref, None)

    def close(self) -> None:
        if self._owned:
            self._ray.shutdown()
            self._owned = False


def _model_configs() -> dict[str, str]:
    """The --model-config paths for the workers' catalogs (on a cluster, the same paths
    must be readable on its nodes)."""
    from simulator.inputs.catalog import MODEL_CONFIGS_ENV

    value = os.environ.get(MODEL_CONFIGS_ENV)
    return {MODEL_CONFIGS_ENV: value} if value else {}
