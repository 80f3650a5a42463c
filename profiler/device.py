"""What machine the profile is measured on: torch's view, NVML's view (nvidia-ml-py) or the CPU.

NVML is probed once; without a driver or a GPU the result says why in one line
(`reason_no_gpu`) and profiling falls back to the CPU. NVML units are converted at the
boundary: memory in bytes, clocks in MHz, power in watts (NVML reports milliwatts).

The host's side (physical cores, load average) is read from /proc and os without torch, so
the CLI can choose a thread count and check `--threads` before it imports torch; torch and
the profile schema are imported by the functions that need them.
"""

from __future__ import annotations

import importlib.util
import math
import os
import platform
import re
import time
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler.options import cpu_count

if TYPE_CHECKING:
    from simulator.inputs.profile import DeviceInfo


def _cpu_name() -> str:
    with suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "cpu"


def _host_memory_bytes() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def host_available_bytes() -> int:
    """Memory the OS could give us now (MemAvailable), or total memory if unknown."""
    with suppress(OSError, ValueError), open("/proc/meminfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return _host_memory_bytes()


def physical_cores(cpuinfo: str | None = None, allowed: set[int] | None = None) -> int:
    """Physical cores among the CPUs this process may use, at least 1.

    Two hyper-threads of one core share its arithmetic units, so a second torch thread on a
    sibling adds synchronisation and little throughput. Cores are distinct (physical id,
    core id) pairs of /proc/cpuinfo; without them, the logical CPUs count. A cgroup CPU
    quota (`cpu.max`) below that lowers it: threads beyond the quota wait for their turn.
    """
    if allowed is None:
        try:
            allowed = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            allowed = set(range(cpu_count()))
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    cores: set[tuple[str, str]] = set()
    for block in cpuinfo.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if "processor" not in fields or "core id" not in fields:
            continue
        with suppress(ValueError):
            if int(fields["processor"]) in allowed:
                cores.add((fields.get("physical id", "0"), fields["core id"]))
    count = len(cores) or len(allowed) or cpu_count()
    quota = _cgroup_cpu_quota()
    return max(1, min(count, quota) if quota else count)


def _cgroup_cpu_quota() -> int | None:
    """CPUs a cgroup v2 quota allows (rounded up), or None without one."""
    try:
        text = Path("/sys/fs/cgroup/cpu.max").read_text(encoding="ascii").split()
        quota, period = text[0], text[1]
        if quota == "max":
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, IndexError, ValueError, ZeroDivisionError):
        return None


def load_average() -> float | None:
    """The 1-minute load average (runnable processes), or None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def other_work(busy: float | None, cpus: int, threads: int) -> bool:
    """Whether `busy` CPUs of other work (a load average or `other_cpus`, without this run's
    threads) are more than the CPUs a run of `threads` threads leaves free, by over half a
    CPU: the run's threads then share cores with it (at 2 threads on 2 CPUs, above 0.5)."""
    return busy is not None and busy > cpus - threads + 0.5


CpuSample = tuple[float, float, float]
"""(monotonic seconds, CPU seconds spent on the CPUs this process may use, CPU seconds of
this process): `cpu_sample`."""


def cpu_sample(stat: str | None = None, allowed: set[int] | None = None) -> CpuSample | None:
    """A reading of /proc/stat and of this process's CPU time, or None without /proc/stat.

    Busy time is user, nice, system, irq, softirq and steal (a hypervisor running other
    machines on the core) of the CPUs in the affinity mask.
    """
    if stat is None:
        try:
            stat = Path("/proc/stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            return None
    if allowed is None:
        try:
            allowed = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            allowed = None
    ticks = 0
    found = False
    for line in stat.splitlines():
        name, *values = line.split() or [""]
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue
        if allowed is not None and int(name[3:]) not in allowed:
            continue
        with suppress(ValueError, IndexError):
            v = [int(x) for x in values[:8]]
            ticks += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
            found = True
    if not found:
        return None
    try:
        hz = os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        hz = 100
    own = os.times()
    return time.monotonic(), ticks / hz, own.user + own.system


def other_cpus(start: CpuSample | None, end: CpuSample | None) -> float | None:
    """CPUs busy with other processes between two samples, on average: what the CPUs did,
    less what this process did. None without samples or over less than 0.1 s (10 ms ticks)."""
    if start is None or end is None or end[0] - start[0] < 0.1:
        return None
    others = (end[1] - start[1]) - (end[2] - start[2])
    return max(0.0, others) / (end[0] - start[0])


def busy_note(load: float | None, cpus: int, own_threads: int = 0, when: str = "") -> str:
    """A warning when the 1-minute load average, less the `own_threads` this run keeps busy,
    is above the `cpus` the run may use; '' otherwise. Other work then takes turns with the
    run's threads, and a step waits for every one of them."""
    if load is None or load - own_threads <= cpus:
        return ""
    own = f", {own_threads} of it this run's" if own_threads else ""
    at = f" {when}" if when else ""
    return (
        f"busy machine: 1-minute load average {load:.2f}{at}{own}, above its {cpus} CPUs; "
        "timings are slower and noisier than on an idle machine"
    )


def slug(name: str) -> str:
    """A directory name for a device: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "device"


def device_slug(info: DeviceInfo) -> str:
    return "cpu" if info.kind == "cpu" else slug(info.name)


def _text(x: Any) -> str:
    # nvidia-ml-py returns str now; older releases returned bytes.
    return x.decode() if isinstance(x, bytes) else str(x)


class NVML:
    """A session with NVML: `NVML.open()` returns one, or a reason why there is none."""

    def __init__(self, module: Any) -> None:
        self.nv = module

    @staticmethod
    def open() -> tuple[NVML | None, str | None]:
        if importlib.util.find_spec("pynvml") is None:
            return None, "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
        import pynvml

        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            return None, f"no NVIDIA driver or GPU ({exc})"
        return NVML(pynvml), None

    def close(self) -> None:
        with suppress(Exception):
            self.nv.nvmlShutdown()

    def _get(self, fn: str, *args: Any) -> Any:
        """One metric, or None where the board or a MIG slice does not support it."""
        try:
            return getattr(self.nv, fn)(*args)
        except self.nv.NVMLError:
            return None
        except AttributeError:
            return None

    def handle_for(self, torch_index: int) -> Any:
        """The NVML handle of torch's device `torch_index`.

        NVML numbers devices in PCI order and ignores CUDA_VISIBLE_DEVICES, so match by UUID.
        """
        import torch

        uuid = getattr(torch.cuda.get_device_properties(torch_index), "uuid", None)
        want = str(uuid).lower().removeprefix("gpu-") if uuid is not None else ""
        count = self._get("nvmlDeviceGetCount") or 0
        for i in range(count):
            h = self._get("nvmlDeviceGetHandleByIndex", i)
            got = _text(self._get("nvmlDeviceGetUUID", h) or "").lower()
            # MIG slices report 'MIG-...'; torch reports the parent's or the slice's UUID.
            if want and got.split("-", 1)[-1] == want:
                return h
        if count == 1 or (not want and torch_index < count):
            return self._get("nvmlDeviceGetHandleByIndex", 0 if count == 1 else torch_index)
        return None

    def driver(self) -> str | None:
        v = self._get("nvmlSystemGetDriverVersion")
        return _text(v) if v is not None else None

    def snapshot(self, h: Any) -> dict[str, Any]:
        """Dynamic metrics: clocks (MHz), power (W), memory in use (bytes), temperature."""
        nv = self.nv
        mem = self._get("nvmlDeviceGetMemoryInfo", h)
        power_mw = self._get("nvmlDeviceGetPowerUsage", h)
        return {
            "sm_clock_mhz": self._get("nvmlDeviceGetClockInfo", h, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": self._get("nvmlDeviceGetClockInfo", h, nv.NVML_CLOCK_MEM),
            "power_w": power_mw / 1000.0 if power_mw is not None else None,
            "memory_used_bytes": int(mem.used) if mem is not None else None,
            "temperature_c": self._get("nvmlDeviceGetTemperature", h, nv.NVML_TEMPERATURE_GPU),
        }

    def static(self, h: Any) -> dict[str, Any]:
        nv = self.nv
        mem = self._get("nvmlDeviceGetMemoryInfo", h)
        limit_mw = self._get("nvmlDeviceGetEnforcedPowerLimit", h)
        cc = self._get("nvmlDeviceGetCudaComputeCapability", h)
        return {
            "name": _text(self._get("nvmlDeviceGetName", h) or ""),
            "uuid": _text(self._get("nvmlDeviceGetUUID", h) or ""),
            "memory_total_bytes": int(mem.total) if mem is not None else None,
            "max_sm_clock_mhz": self._get("nvmlDeviceGetMaxClockInfo", h, nv.NVML_CLOCK_SM),
            "max_mem_clock_mhz": self._get("nvmlDeviceGetMaxClockInfo", h, nv.NVML_CLOCK_MEM),
            "power_limit_w": limit_mw / 1000.0 if limit_mw is not None else None,
            "memory_bus_width_bits": self._get("nvmlDeviceGetMemoryBusWidth", h),
            "compute_capability": ".".join(map(str, cc)) if cc else None,
        }


def cuda_reason() -> str | None:
    """Why torch cannot use a GPU here, or None when it can."""
    import torch

    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        return f"this torch build ({torch.__version__}) has no CUDA support"
    return "torch sees no CUDA device"


def describe(kind: str, index: int = 0, *, threads: int | None = None) -> DeviceInfo:
    """DeviceInfo for `kind` 'cuda' or 'cpu'; NVML fields are added where NVML answers.

    `cpu_threads` is `threads`, or torch's current thread count when not given.
    """
    import torch

    from simulator.inputs.profile import DeviceInfo

    nvml, nvml_reason = NVML.open()
    try:
        if kind == "cuda":
            props = torch.cuda.get_device_properties(index)
            extra: dict[str, Any] | None = None
            driver = None
            if nvml is not None:
                h = nvml.handle_for(index)
                driver = nvml.driver()
                if h is not None:
                    extra = {**nvml.static(h), "start": nvml.snapshot(h)}
            free, total = torch.cuda.mem_get_info(index)
            extra = {**(extra or {}), "torch_free_bytes_start": int(free)}
            return DeviceInfo(
                name=props.name,
                kind="cuda",
                memory_bytes=int(total),
                driver=driver,
                torch_version=torch.__version__,
                cpu_threads=threads or torch.get_num_threads(),
                nvml=extra,
                reason_no_gpu=None if nvml is not None else nvml_reason,
            )
        reason = cuda_reason()
        if reason is None:
            reason = "a GPU is present; the CPU was asked for (--device cpu)"
        elif nvml_reason:
            reason = f"{nvml_reason}; {reason}"
        return DeviceInfo(
            name=_cpu_name(),
            kind="cpu",
            memory_bytes=_host_memory_bytes(),
            driver=None,
            torch_version=torch.__version__,
            cpu_threads=threads or torch.get_num_threads(),
            nvml=None,
            reason_no_gpu=reason,
        )
    finally:
        if nvml is not None:
            nvml.close()


def finish_snapshot(info_nvml: dict[str, Any] | None, index: int = 0) -> dict[str, Any] | None:
    """Add NVML's end-of-run clocks and power to `nvml` (throttling shows as a lower SM clock)."""
    if info_nvml is None:
        return None
    nvml, _ = NVML.open()
    if nvml is None:
        return info_nvml
    try:
        h = nvml.handle_for(index)
        return {**info_nvml, "end": nvml.snapshot(h)} if h is not None else info_nvml
    finally:
        nvml.close()


def info_lines(info: DeviceInfo) -> list[str]:
    """Human-readable lines for `python -m profiler info`."""
    gib = info.memory_bytes / 2**30
    lines = [
        f"device: {info.name} ({info.kind})",
        f"memory: {gib:.1f} GiB",
        f"torch: {info.torch_version}, threads: {info.cpu_threads}",
    ]
    if info.driver:
        lines.append(f"driver: {info.driver}")
    if info.reason_no_gpu:
        lines.append(f"no GPU: {info.reason_no_gpu}")
    for key, value in (info.nvml or {}).items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        lines.append(f"nvml {key}: {value}")
    return lines
