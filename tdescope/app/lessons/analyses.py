"""What turns a lesson's run into its result card, one function per kind of lesson.

Each analysis takes a :class:`~tdescope.app.lessons.run.LessonRun`, runs the
binding's workload through :class:`~tdescope.app.experiment.Experiment` (with a
probe recipe where the lesson counts or shows pages) and compares our figures with
the published ones: ``same direction`` when ours point the way the published ones
do, ``different`` when not, with the numbers either way.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from tdescope.app.ab.result_table import interval_text
from tdescope.app.events import AB_SIDES, LessonCard, PhaseName, Side, WorkloadProgress, WorkloadResult
from tdescope.app.lessons.captures import page_before_after, scan_decrypts
from tdescope.app.lessons.hotspots import RoundHotspots
from tdescope.app.lessons.run import LessonRun
from tdescope.app.lessons.verdicts import DIFFERENT, INCONCLUSIVE, NO_COMPARISON, SAME

__all__ = ["ANALYSES"]


def _published_range(run: LessonRun) -> str:
    values = [p.value for p in run.lesson.published if p.value is not None]
    return interval_text(min(values), max(values), "×") if len(values) > 1 else f"{values[0]:.2f}×"


def ab_ratio(run: LessonRun) -> LessonCard:
    """Seed 000: the median encrypted/plain ratio of interleaved A/B rounds with its interval."""
    run.check_requirements()
    workload = run.workload()
    params = run.params(workload)
    run.step(1, f"{workload.label}: {run.binding.rounds} timed rounds after a warm-up")
    with RoundHotspots(run.session.server_pid(), run.hotspots) as hot:
        ran = run.experiment(workload, params, rounds=max(1, run.binding.rounds))
    result = ran.experiment.ab_result
    total = result.total() if result is not None else None
    if total is None:
        return run.card([], NO_COMPARISON, "no round completed: nothing to compare", params=params)
    run.step(4, "comparing the median ratio with the published ones")
    figures = {"ratio_median": round(total.ratio_median, 4), "ratio_ci_low": round(total.ratio_ci_low, 4),
               "ratio_ci_high": round(total.ratio_ci_high, 4), "rounds": result.completed_rounds(),
               "encrypted_median_s": round(total.encrypted_median_s, 6),
               "plain_median_s": round(total.plain_median_s, 6)}
    ours = [f"elapsed encrypted / plain: {total.ratio_median:.2f}× (95 % interval "
            f"{interval_text(total.ratio_ci_low, total.ratio_ci_high, '×')}, median of {result.completed_rounds()} rounds; "
            f"{total.encrypted_median_s:.3f} s vs {total.plain_median_s:.3f} s)"]
    evidence = [f"phase {p.phase}: {p.ratio_median:.2f}× ({interval_text(p.ratio_ci_low, p.ratio_ci_high, '×')})"
                for p in result.phases if p.phase != PhaseName.TOTAL]
    evidence += [f"warning: {w}" for w in result.warnings()]
    hot_lines, hot_figures = hot.evidence(ran.of(WorkloadProgress))
    evidence += hot_lines
    figures.update(hot_figures)
    published = _published_range(run)
    if total.ratio_ci_low > 1:
        verdict, text = SAME, (f"encrypted slower here too: {total.ratio_median:.2f}× (the whole interval above 1) "
                               f"vs {published} published")
    elif total.ratio_median > 1:
        verdict, text = INCONCLUSIVE, (f"{total.ratio_median:.2f}× but the interval "
                                       f"({interval_text(total.ratio_ci_low, total.ratio_ci_high, '×')}) reaches 1: no clear cost at these parameters "
                                       f"(published {published}); raise rounds or the workload's size")
    else:
        verdict, text = DIFFERENT, (f"encrypted not slower here: {total.ratio_median:.2f}× vs {published} published")
    return run.card(ours, verdict, text, evidence, figures, params)


def _two_by_two_cell(result: WorkloadResult, side: str, phase: str) -> tuple[float, str] | None:
    cell = result.counts.get(f"{side} {phase}", {})
    cpu = cell.get("server CPU ms (median)") or cell.get("server CPU ms")  # MariaDB's rounds; SQLCipher's one scan
    if cpu:
        return float(cpu), "server CPU"
    for t in result.timings:
        if t.side == side and t.phase == phase:
            return t.elapsed_s * 1000, "elapsed"
    return None


def two_by_two(run: LessonRun) -> LessonCard:
    """Seed 002: encrypted/plain of a cold scan and of a warm one (the server's CPU where the engine gives it)."""
    workload = run.workload()
    params = run.params(workload)
    cells: dict[tuple[str, str], list[float]] = {}
    measure = "elapsed"
    repeats = max(1, run.binding.rounds)
    for n in range(repeats):
        run.step(2, f"cold and warm scans, run {n + 1}/{repeats}")
        ran = run.experiment(workload, params)
        for result in ran.of(WorkloadResult):
            for side in AB_SIDES:
                for phase in (PhaseName.COLD, PhaseName.WARM):
                    cell = _two_by_two_cell(result, side, phase)
                    if cell is not None:
                        cells.setdefault((side, phase), []).append(cell[0])
                        measure = cell[1]
    if len(cells) < 4:
        return run.card([], NO_COMPARISON, "the workload did not measure all four cells", params=params)
    med = {key: statistics.median(values) for key, values in cells.items()}
    cold = med["encrypted", "cold"] / med["plain", "cold"]
    warm = med["encrypted", "warm"] / med["plain", "warm"]
    figures = {"measure": measure, "cold_ratio": round(cold, 4), "warm_ratio": round(warm, 4), "runs": repeats,
               **{f"{s}_{p}_ms": round(v, 3) for (s, p), v in med.items()}}
    ours = [f"{measure} encrypted / plain, cold: {med['encrypted', 'cold']:.1f} ms vs {med['plain', 'cold']:.1f} ms "
            f"= {cold:.2f}×",
            f"{measure} encrypted / plain, warm: {med['encrypted', 'warm']:.1f} ms vs {med['plain', 'warm']:.1f} ms "
            f"= {warm:.2f}×"]
    inner = f", each the median of its {params['rounds']} rounds" if "rounds" in params else ""
    evidence = [f"median of {repeats} workload run(s){inner}"]
    if cold > 1 and cold > warm:
        verdict, text = SAME, (f"encryption costs on the cold scan ({(cold - 1) * 100:+.0f} %) more than on the warm "
                               f"one ({(warm - 1) * 100:+.0f} %); published +39 % cold, +2 % warm")
    else:
        verdict, text = DIFFERENT, (f"cold {(cold - 1) * 100:+.0f} %, warm {(warm - 1) * 100:+.0f} %; "
                                    f"published +39 % cold, +2 % warm")
    return run.card(ours, verdict, text, evidence, figures, params)


def matrix(run: LessonRun) -> LessonCard:
    """Seed 003's column matrix: each cipher column's decrypting read over the plain column's."""
    run.check_requirements()
    workload = run.workload()
    params = run.params(workload)
    run.step(1, "encrypting one column per cipher, with and without the integrity check")
    ran = run.experiment(workload, params)
    results = ran.of(WorkloadResult)
    secs = {t.side: t.elapsed_s for r in results for t in r.timings if t.phase == PhaseName.TOTAL}
    if Side.PLAIN not in secs or len(secs) < 2:
        return run.card([], NO_COMPARISON, "the matrix did not complete", params=params)
    # the server's CPU per cell where the workload could read it (a local backend): a busy machine stretches a
    # few-ms plain cell's elapsed time, and with it every ratio (3DES at 2.8× against an AES cell at 3.2×)
    cpu = {side: c["server CPU ms (median)"] / 1000 for r in results for side, c in r.counts.items()
           if c.get("server CPU ms (median)")}
    measure = "server CPU" if set(secs) <= set(cpu) else "elapsed"
    if measure == "server CPU":
        secs = {cell: cpu[cell] for cell in secs}
    run.step(3, f"dividing each column's time ({measure}) by the plain column's")
    ratio = {cell: s / secs["plain"] for cell, s in secs.items()}
    figures = {f"ratio_{cell.replace(' ', '_').replace('-', '').lower()}": round(r, 3) for cell, r in ratio.items()}
    figures["plain_s"], figures["measure"] = round(secs["plain"], 6), measure
    ours = [f"{cell}: {secs[cell]:.3f} s {measure} = {r:.1f}× plain" for cell, r in ratio.items()]
    aes_nomac = [r for c, r in ratio.items() if c.startswith("AES") and "no-mdc" in c]
    aes_mac = [r for c, r in ratio.items() if c.startswith("AES") and "no-mdc" not in c]
    des = [r for c, r in ratio.items() if c.startswith("3DES")]
    checks = {
        "plain fastest": all(r >= 1 for r in ratio.values()),
        "AES without the check faster than with it": bool(aes_nomac and aes_mac)
        and statistics.mean(aes_nomac) < statistics.mean(aes_mac),
        "3DES slowest": bool(des and aes_mac) and min(des) > max(aes_mac + aes_nomac),
    }
    evidence = [f"{'yes' if ok else 'no'}: {what}" for what, ok in checks.items()]
    if int(params.get("rounds", 1)) > 1:
        evidence.append(f"each cell the median of {params['rounds']} interleaved rounds")
    shape = (f"AES no-mdc {interval_text(min(aes_nomac), max(aes_nomac), '×', 1)}, "
             f"AES {interval_text(min(aes_mac), max(aes_mac), '×', 1)}, "
             f"3DES {interval_text(min(des), max(des), '×', 1)}" if aes_nomac and aes_mac and des else "incomplete")
    if all(checks.values()):
        verdict, text = SAME, f"same order as published: {shape} (published 7.3–8.7×, 21–23×, 80–98×)"
    else:
        failed = ", ".join(w for w, ok in checks.items() if not ok)
        verdict, text = DIFFERENT, f"{shape}; not as published: {failed} (published 7.3–8.7×, 21–23×, 80–98×)"
    return run.card(ours, verdict, text, evidence, figures, params)


def _pgbench_ab(run: LessonRun, results: list[WorkloadResult], params) -> LessonCard:
    """Seed 004 with an encrypted side: per round, TPS encrypted / plain for each load; median and range."""
    ours, evidence, figures, ratios = [], [], {}, {}
    for mode, key in (("read-only", "ro"), ("read-write", "rw")):
        tde = [t.elapsed_s for r in results for t in r.timings if t.side == "tde" and t.phase == f"{mode} tps"]
        plain = [t.elapsed_s for r in results for t in r.timings if t.side == Side.PLAIN and t.phase == f"{mode} tps"]
        pairs = [a / b for a, b in zip(tde, plain) if b]
        if not pairs:
            return run.card([], NO_COMPARISON, f"pgbench did not run {mode} on both sides", params=params)
        ratios[key] = (statistics.median(pairs), min(pairs), max(pairs))
        enc_tps, plain_tps = statistics.median(tde), statistics.median(plain)
        figures.update({f"{key}_ratio_median": round(ratios[key][0], 4), f"{key}_ratio_min": round(min(pairs), 4),
                        f"{key}_ratio_max": round(max(pairs), 4), f"{key}_tps_encrypted": round(enc_tps, 1),
                        f"{key}_tps_plain": round(plain_tps, 1)})
        ours.append(f"{mode} TPS, encrypted / plain: {ratios[key][0]:.2f}× "
                    f"(range {interval_text(min(pairs), max(pairs), '×')} "
                    f"over {len(pairs)} rounds; median {enc_tps:.0f} vs {plain_tps:.0f} TPS)")
    evidence += [" | ".join(row) for r in results for row in r.table]
    ro, rw = ratios["ro"], ratios["rw"]
    if ro[1] <= 1.0 <= ro[2] or 0.9 <= ro[0] <= 1.1:
        ro_text = "read-only about unchanged, as published"
        ro_same = True
    else:
        ro_text, ro_same = f"read-only {ro[0]:.2f}× (published: unchanged)", False
    if rw[2] < 1.0:
        rw_text, rw_same = f"read-write slower, {rw[0]:.2f}× (published 0.56×)", True
    elif rw[1] < 1.0:
        rw_text, rw_same = f"read-write {rw[0]:.2f}×, its range reaching 1 (published 0.56×)", None
    else:
        rw_text, rw_same = f"read-write not slower, {rw[0]:.2f}× (published 0.56×)", False
    if ro_same and rw_same:
        verdict = SAME
    elif rw_same is None:
        verdict = INCONCLUSIVE
    else:
        verdict = DIFFERENT
    return run.card(ours, verdict, f"{ro_text}; {rw_text}", evidence + [
        f"scale {params.get('scale')}, {params.get('clients')} clients, {params.get('seconds')} s per load, "
        f"{params.get('rounds')} rounds per side (ABBA)"], figures, params)


def pgbench(run: LessonRun) -> LessonCard:
    """Seed 004: pgbench read-only and read-write TPS; encrypted / plain when the engine has both sides
    (the pg-tde lab), else the stock column only."""
    workload = run.workload()
    params = run.params(workload)
    run.step(2, "pgbench read-only, then read-write")
    ran = run.experiment(workload, params)
    results = ran.of(WorkloadResult)
    if any(t.side == "tde" for r in results for t in r.timings):
        return _pgbench_ab(run, results, params)
    tps = {t.side: t.elapsed_s for r in ran.of(WorkloadResult) for t in r.timings if t.phase == "tps"}
    ro, rw = tps.get("read-only"), tps.get("read-write")
    if ro is None or rw is None:
        return run.card([], NO_COMPARISON, "pgbench did not run both loads", params=params)
    figures = {"ro_tps": round(ro, 1), "rw_tps": round(rw, 1), "rw_over_ro": round(rw / ro, 4) if ro else None}
    ours = [f"stock PostgreSQL, read-only: {ro:.0f} TPS", f"stock PostgreSQL, read-write: {rw:.0f} TPS",
            "TDE build: not installed here, so no TDE / stock ratio"]
    text = (f"no TDE build here (CYBERTEC/Percona TDE not installed): ours is the stock column only, "
            f"RO {ro:.0f} TPS, RW {rw:.0f} TPS; published TDE/stock: RO ~1.0×, RW 0.56×")
    return run.card(ours, NO_COMPARISON, text, [f"scale {params.get('scale')}, {params.get('clients')} clients, "
                                                  f"{params.get('seconds')} s per load"], figures, params)


def workload_table(run: LessonRun) -> LessonCard:
    """Lessons whose workload reports a table to read beside the published one (Oracle's)."""
    workload = run.workload()
    params = run.params(workload)
    run.step(1, workload.label)
    ran = run.experiment(workload, params)
    ours = [" | ".join(str(c) for c in row) for r in ran.of(WorkloadResult) for row in r.table]
    return run.card(ours, NO_COMPARISON, "compare the table with the published figures (not checked automatically)",
                    params=params)


#: glibc's malloc: below this a request is served from the brk heap (or an arena); at or above it, by its own
#: mmap, given back by munmap on free. Dynamic: a freed mmapped block raises it (up to 32 MiB on 64-bit).
MMAP_THRESHOLD = 128 * 1024
_MEMORY_SYSCALLS = ("mmap", "munmap", "mremap", "brk", "madvise")


def memory_operations(run: LessonRun) -> LessonCard:
    """Seed 003's 'PGA memory operation' on any engine: the memory syscalls of the server process while
    a statement sorts or a cache grows, timed and sized by the eBPF wait tracer, beside p1 = 131072."""
    from tdescope.app.engines.capabilities import Ability, has_ability
    from tdescope.app.errors import UserError
    from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer
    from tdescope.app.waits.exact import avg_us, figures, format_sizes

    binding = run.binding
    if binding.workload == "sql":
        if not has_ability(run.session, Ability.RUN_SQL):
            return run.card([], NO_COMPARISON, f"{run.engine.name} runs no SQL of tdescope's")
        params = dict(binding.params)
        setup = [q for q in params.get("setup", ()) if q]
        sql = str(params["sql"])
        steps = [(run.session.sql_workload(q), {"sql": q, "repeat": 1}) for q in setup]
        repeat = int((binding.fast if run.fast else params).get("repeat", params.get("repeat", 1)))
        steps.append((run.session.sql_workload(sql, repeat), {"sql": sql, "repeat": repeat}))
        what = f"{sql} (×{repeat}, after {'; '.join(setup)})" if setup else sql
    else:
        workload = run.workload()
        steps = [(workload, run.params(workload))]
        what = workload.label
    if run.remote is not None:
        return run.card([], NO_COMPARISON, f"traces the server's syscalls with eBPF on this machine; the server "
                        f"is on {run.remote}: run `tdescope lessons run` on that host")
    pid = run.session.server_pid()
    run.step(1, f"tracing pid {pid}'s syscalls with eBPF")
    try:
        tracer = EbpfWaitTracer(pid).start()
    except UserError as exc:
        return run.card([], NO_COMPARISON, f"needs the eBPF wait tracer: {exc}")
    try:
        run.step(2, what)
        for workload, params in steps:
            run.experiment(workload, params)
        totals = tracer.read()
    finally:
        tracer.stop()
    run.step(3, "memory operations with their sizes, beside the published p1")
    rows = figures(totals)
    mem = [f for f in rows if f.syscall in _MEMORY_SYSCALLS]
    syscalls_us = sum(f.total_us for f in rows if f.wait_class not in ("Idle", "Off CPU", "CPU queue"))
    mem_us = sum(f.total_us for f in mem)
    share = 100.0 * mem_us / syscalls_us if syscalls_us else 0.0
    ours = [f"{f.syscall}: {f.count:,} calls, {f.total_us / 1e3:.2f} ms, avg {avg_us(f):.1f} µs, p99 "
            f"{f.p99_us:.1f} µs" + (f"; sizes {format_sizes(f, 3)}" if f.sizes else "") for f in mem]
    ours.append(f"memory operations: {mem_us / 1e3:.2f} ms = {share:.1f} % of the process's non-idle syscall time "
                f"({syscalls_us / 1e3:.2f} ms)")
    sizes = {size for f in mem if f.syscall in ("mmap", "munmap") for size, _ in f.sizes}
    big = sorted(s for s in sizes if s >= MMAP_THRESHOLD)
    evidence = [f"glibc malloc maps a request of {MMAP_THRESHOLD} B or more with its own mmap and unmaps it on free; "
                "smaller ones come from the brk heap or an arena (grown by brk, trimmed by madvise). The threshold "
                "rises to the size of a freed mapped block (up to 32 MiB), so a workload that frees large blocks "
                "soon stops mapping them: Oracle's PGA allocates in 128 KiB granules itself, which is why its p1 "
                "stays 131072.",
                "cost = count × duration, as in the seed: the count comes from the kernel, not from samples"]
    figs = {"memory_us": round(mem_us, 1), "syscall_us": round(syscalls_us, 1), "memory_pct": round(share, 2),
            "mmap_sizes": sorted(sizes), "calls": {f.syscall: f.count for f in mem}}
    if not mem:
        return run.card(ours, INCONCLUSIVE, "no memory operation while the workload ran", evidence, figs)
    if 131072 in sizes:
        verdict, text = SAME, (f"mmap/munmap of 131072 B here too ({share:.1f} % of the syscall time): the "
                               "allocator's granule, as in p1 = 131072")
    elif big:
        verdict, text = SAME, (f"mmap/munmap of large blocks here too ({', '.join(map(str, big[:3]))} B; "
                               f"{share:.1f} % of the syscall time), not in 128 KiB granules: malloc's threshold "
                               "decides the sizes")
    else:
        verdict, text = DIFFERENT, (f"no mapping at or above {MMAP_THRESHOLD} B: this allocator grew its heap "
                                    f"instead (brk/madvise, {share:.1f} % of the syscall time)")
    return run.card(ours, verdict, text, evidence, figs)


#: analysis name (a lesson file's ``analysis``) -> function
ANALYSES: dict[str, Callable[[LessonRun], LessonCard]] = {
    "ab_ratio": ab_ratio, "scan_decrypts": scan_decrypts, "page_before_after": page_before_after, "two_by_two": two_by_two,
    "matrix": matrix, "pgbench": pgbench, "workload_table": workload_table, "memory_operations": memory_operations}
