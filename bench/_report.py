"""Write bench results as JSON and a markdown table (goal vs measured), with the machine and date."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"

#: key -> (meaning, goal text, check(value) -> bool | None)
GOALS: dict[str, tuple[str, str, object]] = {}


def goal(key: str, meaning: str, text: str = "", check=None) -> None:
    """Declare a figure: its meaning and, when it has one, its goal."""
    GOALS[key] = (meaning, text, check)


def machine() -> dict:
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "kernel": platform.release(), "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}


def write(results: dict, quick: bool, name: str = "latest") -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "quick": quick, "machine": machine(), **results}
    (RESULTS / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
    m = doc["machine"]
    lines = [f"# tdescope benchmarks ({'quick' if quick else 'full'})", "",
             f"{doc['date']} · {m['cpu']} · {m['cores']} cores · {m['memory_gb']} GiB · Python {m['python']}", "",
             "| figure | meaning | goal | measured | |", "|---|---|---|---|---|"]
    for key, value in results.items():
        if isinstance(value, (list, dict)):
            continue  # per-run series stay in the JSON
        meaning, text, check = GOALS.get(key, ("", "", None))
        ok = check(value) if (check and isinstance(value, (int, float))) else None
        mark = {True: "✓", False: "✗", None: ""}[ok]
        shown = (f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}") if isinstance(value, float) else str(value)
        lines.append(f"| `{key}` | {meaning} | {text} | {shown} | {mark} |")
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    return RESULTS / f"{name}.md"
