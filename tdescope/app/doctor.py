"""Environment checks for ``tdescope doctor``: can this machine probe a database process?"""

from __future__ import annotations

import os
from importlib import metadata
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass

from tdescope.app.engines.registry import discover_engines
from tdescope.app.gdb.mi import MIN_GDB  # one minimum, shared with the capture path
from tdescope.app.system.qt_libraries import missing_qt_libraries, qt_packages
from tdescope.app.system.runtime_tools import GDB, LIBBPF, PERF, XVFB, Tool, install_line

__all__ = ["Check", "cpu_flags", "install_advice", "run_checks", "ptrace_problem", "MIN_GDB"]


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the doctor's report: ``ok`` is None for information-only lines.

    ``abilities`` is set on an engine's line only: the optional abilities its plugin declares.
    ``packages``: the Debian packages that bring what this line misses (gathered into one install line).
    """

    name: str
    ok: bool | None
    value: str
    fix: str = ""
    abilities: tuple[str, ...] | None = None
    packages: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = asdict(self)
        if self.abilities is None:
            del out["abilities"]
        if not self.packages:
            del out["packages"]
        return out


def cpu_flags() -> set[str]:
    """Flags of the first CPU in /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def ptrace_problem() -> str | None:
    """Why this user may not attach to other processes, or None when it may."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as fh:
            scope = int(fh.read().strip())
    except (OSError, ValueError):
        scope = 0
    if scope >= 3:
        return "kernel.yama.ptrace_scope is 3: attaching is disabled until reboot"
    if scope >= 1 and os.geteuid() != 0:
        return f"kernel.yama.ptrace_scope is {scope}: run as root or set it to 0 (sysctl kernel.yama.ptrace_scope=0)"
    return None


def _gdb_check() -> Check:
    from tdescope.app.gdb.mi import gdb_version

    path = shutil.which("gdb")
    if not path:
        return _absent(GDB, False)
    try:
        ver = gdb_version(path)
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("gdb", False, f"{path}: does not run ({exc})", "reinstall gdb")
    ok = ver >= MIN_GDB
    fix = "" if ok else f"gdb {MIN_GDB[0]}.{MIN_GDB[1]} or newer is needed (FinishBreakpoint)"
    return Check("gdb", ok, f"{path} {ver[0]}.{ver[1]}", fix)


def _perf_check() -> list[Check]:
    path = shutil.which("perf")
    out = []
    if not path:
        out.append(_absent(PERF, False))
    else:
        out.append(Check("perf", True, path))
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as fh:
            paranoid = int(fh.read().strip())
    except (OSError, ValueError):
        paranoid = None
    if paranoid is None:
        out.append(Check("perf_event_paranoid", False, "unreadable", "perf events are not available in this kernel"))
    else:
        ok = os.geteuid() == 0 or paranoid <= 1
        fix = "" if ok else f"run sysctl kernel.perf_event_paranoid=1 (it is {paranoid}) or run as root"
        out.append(Check("perf_event_paranoid", ok, str(paranoid), fix))
    return out


def _ebpf_checks() -> list[Check]:
    """eBPF capture: kernel, permission, libbpf, the built program and a real load through the verifier.

    Its lines are information when eBPF cannot run (``ok`` None): capture then falls back to gdb."""
    from tdescope.app.probe.selection import MIN_KERNEL, ebpf_status

    st = ebpf_status()
    soft = lambda good: True if good else None  # noqa: E731 - gdb remains: not a failure
    kernel_ok = tuple(int(x) for x in st.kernel.split("-")[0].split(".")[:2] if x.isdigit()) >= MIN_KERNEL
    return [
        Check("eBPF kernel", soft(kernel_ok), st.kernel + ("" if kernel_ok else " (5.8 or later needed)")),
        Check("eBPF permission", soft(st.permitted), "root or CAP_BPF+CAP_PERFMON" if st.permitted else "denied",
              "" if st.permitted else "run as root, or grant CAP_BPF and CAP_PERFMON"),
        Check("libbpf", True, "libbpf.so.1") if st.libbpf else _absent(LIBBPF, None),
        Check("eBPF capture", soft(st.ok), "program loads (verifier accepts it)" if st.ok
              else f"off, gdb will be used: {st.reason}", _ebpf_fix(st.ok or not (st.libbpf and st.permitted))),
    ]


def _ebpf_fix(said_elsewhere: bool) -> str:
    """What to do when an eBPF program does not load, unless the libbpf or permission line says it."""
    if said_elsewhere:
        return ""
    return "it needs root, or CAP_BPF and CAP_PERFMON; reinstall tdescope (a checkout: make setup builds it)"


def _ebpf_waits_check(libbpf: bool) -> Check:
    """Exact waits: the eBPF wait tracer loaded for real (on this process) and taken out again.

    Information when it cannot (``ok`` None): ``waits`` and the Waits dock then give /proc samples only."""
    from tdescope.app.errors import UserError
    from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer

    try:
        EbpfWaitTracer(os.getpid()).start().stop()
    except UserError as exc:
        return Check("eBPF waits", None, f"off, /proc samples only: {exc}", _ebpf_fix(not libbpf))
    return Check("eBPF waits", True, "tracer loads (raw syscall and sched_switch tracepoints attach)")


def _absent(tool: Tool, ok: bool | None) -> Check:
    """The line of a missing tool: what it is for, and its package (in the install line at the end)."""
    return Check(tool.name, ok, f"not found ({tool.purpose})", f"package {tool.package}", packages=(tool.package,))


def _xvfb_check() -> Check:
    """Xvfb: information only (the window without a screen, headless screenshots)."""
    return Check(XVFB.name, True, "found") if XVFB.present() else _absent(XVFB, None)


def _qt_libraries_check() -> Check:
    """The X11/OpenGL/font libraries under the PySide6 wheel's Qt: without them the window does not start."""
    missing = missing_qt_libraries()
    if not missing:
        return Check("Qt libraries", True, "the window's system libraries are there")
    packages = tuple(qt_packages(missing))
    return Check("Qt libraries", False, f"missing {', '.join(missing)} (the window cannot start)",
                 f"packages {' '.join(packages)}" if packages else "install the packages that bring them",
                 packages=packages)


def install_advice(checks: list[Check]) -> Check | None:
    """One line installing every package the checks miss, for this distribution (None: nothing missing)."""
    packages = list(dict.fromkeys(p for c in checks for p in c.packages))
    if not packages:
        return None
    line = install_line(packages)
    return Check("install", None, line or f"with your distribution's packages: {', '.join(packages)} "
                 "(Debian names)", packages=tuple(packages))


def run_checks() -> list[Check]:
    """Every check, in report order."""
    checks = [
        Check("Python", sys.version_info >= (3, 11), platform.python_version()),
        Check("tdescope", None, __import__("tdescope").__version__),
    ]
    try:
        qt_version = metadata.version("PySide6-Essentials")
        platform_name = os.environ.get("QT_QPA_PLATFORM") or (
            "xcb" if os.environ.get("DISPLAY") else "none: no DISPLAY (use tdescope's headless commands, or Xvfb)"
        )
        checks.append(Check("Qt", True, f"PySide6 {qt_version}, platform {platform_name}"))
        checks.append(_qt_libraries_check())
    except metadata.PackageNotFoundError:
        checks.append(Check("Qt", False, "PySide6 missing", "pip install PySide6-Essentials"))
    checks.append(_gdb_check())
    problem = ptrace_problem()
    checks.append(Check("ptrace", problem is None, "permitted" if problem is None else "denied", problem or ""))
    ebpf = _ebpf_checks()
    checks.extend(ebpf)
    checks.append(_ebpf_waits_check(any(c.name == "libbpf" and c.ok for c in ebpf)))
    checks.extend(_perf_check())
    checks.append(_xvfb_check())
    flags = cpu_flags()
    checks.append(Check("AES-NI", "aes" in flags, "yes" if "aes" in flags else "no (software AES: slower)"))
    checks.append(Check("PCLMULQDQ", None, "yes" if "pclmulqdq" in flags else "no"))
    engines, errors = discover_engines()
    checks.append(Check("engines", bool(engines), ", ".join(sorted(engines)) or "none"))
    for name, engine in sorted(engines.items()):
        names = tuple(sorted(a.value for a in engine.abilities))
        checks.append(Check(f"engine {name}", True, f"abilities: {', '.join(names) or 'none'}", abilities=names))
    for err in errors:
        checks.append(Check(f"engine {err.name}", False, err.message, "reinstall or remove the plugin"))
    advice = install_advice(checks)
    return checks + ([advice] if advice else [])
