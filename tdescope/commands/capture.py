"""``tdescope capture``: pages before and after decryption, headless."""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path

from tdescope.app.errors import UserError
from tdescope.commands._args import (
    add_probe_arguments, add_stop_budget_argument, engine_named, positive_int, probe_backend, recipe_named, seconds,
)
from tdescope.commands._dsn import add_dsn_arguments
from tdescope.commands._ssh import (add_ssh_arguments, agent_windows, connect, ebpf_options, lost_line,
                                   remote_backend, ssh_host)
from tdescope.commands._stdout import ReaderGone, emit
from tdescope.commands._target import resolve_target, run_to_end

HELP = "capture pages before and after decryption, headless"

#: Said when ``--dsn`` names neither a backend to watch nor work for tdescope's own.
OWN_IDLE = ("the watched backend, pid {pid}, is tdescope's own idle connection: name an application's busy "
            "backend with --target-pid PID (from pg_stat_activity), or give it work with --sql")


def add_arguments(cap) -> None:
    cap.add_argument("--engine", default="sqlcipher")
    where = cap.add_mutually_exclusive_group(required=True)
    where.add_argument("--lab", action="store_true", help="start the engine's lab and run its workload")
    where.add_argument("--pid", type=positive_int, help="attach to this process")
    where.add_argument("--dsn", help="connect to this server (e.g. postgres) and probe the backend serving it")
    add_dsn_arguments(cap)
    cap.add_argument("--recipe", default="decrypt", help="decrypt (default) or encrypt, or a recipe key")
    cap.add_argument("--count", type=positive_int, default=10, help="page pairs to capture (default 10)")
    cap.add_argument("--timeout", type=seconds, default=30.0, help="give up after this many seconds (default 30)")
    add_stop_budget_argument(cap)
    add_probe_arguments(cap)
    cap.add_argument("--dump", metavar="DIR", help="write NNNN-before-ROLE.bin / NNNN-after-ROLE.bin here "
                     "(ROLE: plaintext, ciphertext or plaintext-or-ciphertext; NNNN is the capture's seq). "
                     "Files are 0600, a new DIR 0700. A DIR that already holds dumps is refused")
    cap.add_argument("--force", action="store_true",
                     help="with --dump: delete the earlier dumps (NNNN-*.bin) in DIR first, then write the new ones")
    cap.add_argument("--json", action="store_true", help="one JSON object per capture")
    add_ssh_arguments(cap)


def run(args) -> int:
    from tdescope.app.probe.capture_record import describe_capture, side_label
    from tdescope.app.events import CaptureWindowState, PageCapture, Problem, WindowState

    ssh_host(args)  # a bad --ssh DEST, or ssh options without it: one line before anything starts
    engine = engine_named(args.engine)
    recipe = recipe_named(engine, args.recipe)
    if args.ssh:  # chosen from what the agent on the host has (remote_backend, in _run), not this machine
        backend, fell_back = None, None
    else:
        backend, fell_back = probe_backend(args, recipe)  # before anything connects
    if fell_back:
        print(fell_back, file=sys.stderr, flush=True)
    decoder = [engine.page_decoder()]  # the session's, which knows the tables, once connected (_run)
    dump = _dump_folder(args) if args.dump else None
    lock = threading.Lock()
    written = [0]
    pages = [0]  # how many of them were database pages (the rest: data buffers such as pgcrypto values)
    reader_gone = threading.Event()  # `| head -1` has seen enough: disarm and end quietly
    running: list = []  # the experiment, once started (the sink cancels it when the reader leaves)

    def sink(event) -> None:
        if isinstance(event, PageCapture):
            if reader_gone.is_set():
                return
            record, _ = describe_capture(event, decoder[0])
            with lock:
                if dump is not None:
                    for side, data in (("before", event.before), ("after", event.after)):
                        if data:
                            role = side_label(event, side).replace(" ", "-")
                            _write_private(dump / f"{event.seq:04d}-{side}-{role}.bin", data)
                try:
                    emit(json.dumps(record.to_json()) if args.json else record.line())
                except ReaderGone:
                    reader_gone.set()
                    for exp in running:
                        exp.cancel()  # on the window's own thread: it disarms at its next step
                    return
                written[0] += 1
                pages[0] += record.is_page
        elif isinstance(event, CaptureWindowState) and event.state is WindowState.PAUSED and not args.json:
            print(f"probe paused: {event.message}", file=sys.stderr, flush=True)
        elif isinstance(event, Problem) and not args.json:
            pass  # reported once, below

    agent = connect(args) if args.ssh else None  # the agent on the host probes; --dsn goes through its ssh
    try:
        exp = _run(args, engine, recipe, backend, agent, sink, running, written, dump, decoder)
    finally:
        if agent is not None:
            agent.close()
    if agent is not None:
        exp.error = lost_line(agent, exp.error)
    return _finish(args, exp, written, pages, reader_gone, dump)


def _run(args, engine, recipe, backend, agent, sink, running, written, dump, decoder):
    """Resolve the target (over ``--ssh``: on the host, through the agent), run the window and the
    workload, if any, to their end; the finished :class:`~tdescope.app.experiment.Experiment`."""
    from tdescope.app.engines.capabilities import Ability, has_ability
    from tdescope.app.experiment import CaptureSpec, Experiment, WorkloadRun
    from tdescope.app.probe.window import CaptureLimits, stop_budget

    target = resolve_target(args, engine, probing=True, stops_target=backend is not None and backend.stops_target,
                            remote=agent)
    if target.session is not None and has_ability(target.session, Ability.CATALOG_DECODER):
        decoder[0] = target.session.catalog_decoder()
    own_idle = (target.session is not None and target.workload is None and args.target_pid is None
                and has_ability(target.session, Ability.CHOOSE_TARGET))
    if own_idle:  # watching the backend of tdescope's own connection, which runs nothing: say so up front
        print(f"tdescope: {OWN_IDLE.format(pid=target.pid)}", file=sys.stderr, flush=True)
    try:
        if recipe.requires and has_ability(target.session, Ability.REQUIRE_EXTENSIONS):
            target.session.require_extension(recipe.requires)  # before anything is armed
        limits = CaptureLimits(max_captures=args.count, max_seconds=args.timeout, first_hit_timeout=args.timeout,
                               stops=stop_budget(target.own_target, args.stop_budget, args.accept_stop))
        windows = None
        if agent is not None:  # eBPF or gdb, from what the host has (remote_backend)
            remote, note = remote_backend(args, recipe, agent.host.dest, agent.welcome)
            if note:
                print(note, file=sys.stderr, flush=True)
            windows = agent_windows(agent, ebpf_options(args), remote)
        run = WorkloadRun(workload=target.workload, params=target.params, until_captured=True) \
            if target.workload is not None else None
        exp = Experiment(target.session, engine.name, sink, pid=target.pid, run=run,
                         capture=CaptureSpec(recipe=recipe, limits=limits, backend=backend,
                                             allow_critical=args.allow_critical, windows=windows))
        if agent is not None:
            print(f"capturing on {agent.label}", file=sys.stderr, flush=True)
        running.append(exp)
        try:
            run_to_end(exp, 15)
        except KeyboardInterrupt:
            kept = f", dumped to {dump}" if dump is not None and written[0] else ""
            raise KeyboardInterrupt(f"interrupted: {written[0]} pairs captured{kept}") from None
    finally:
        target.close()
    return exp


def _finish(args, exp, written, pages, reader_gone, dump) -> int:
    """What ``capture`` says once its window ended: an error line, or the count and the window's costs."""
    from tdescope.app.system.private_files import shared_folder_note

    if reader_gone.is_set() and not exp.error:
        return 0  # the window disarmed and detached as on any cancel; say nothing more
    if exp.error:
        raise UserError(exp.error)
    if written[0] == 0:
        raise UserError(f"no page captured within {args.timeout:g} s")
    s = exp.capture_summary
    if dump is not None and (shared := shared_folder_note(dump)) is not None:
        print(f"tdescope: note: {shared}", file=sys.stderr)  # with success only: an error stays one line
    if args.json:
        if s is not None:
            emit(json.dumps({"summary": True, **summary_json(s, written[0])}))
    else:
        why = f" ({s.reason})" if s is not None and s.reason else ""  # every way a window ends is said
        what = "page pairs" if pages[0] == written[0] else "buffer pairs" if not pages[0] else "pairs"
        print(f"{written[0]} {what} captured{why}{summary_line(s)}", file=sys.stderr)
    return 0


def _dump_folder(args) -> Path:
    """The ``--dump`` folder, ready before anything is armed: created 0700 when new, earlier dumps refused
    (or deleted with ``--force``, so the folder's NNNN always match this run's ``seq``)."""
    from tdescope.app.system.private_files import make_private_folder

    dump = Path(args.dump)
    try:
        make_private_folder(dump)  # pages hold plaintext: owner only
        earlier = sorted(p for p in dump.iterdir() if _DUMP_NAME.fullmatch(p.name))
    except OSError as exc:
        raise UserError(f"cannot create dump folder {dump}: {exc.strerror or exc}") from None
    if earlier and not args.force:
        raise UserError(f"{dump} already holds dumps ({len(earlier)} files, {earlier[0].name} …): choose another "
                        "folder, or pass --force to replace them")
    for p in earlier:
        p.unlink(missing_ok=True)
    return dump


#: What ``--dump`` writes: ``0001-before-ciphertext.bin``.
_DUMP_NAME = re.compile(r"\d{4,}-(before|after)-[a-z-]+\.bin")


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file at ``path``, readable by its owner only (0600) whatever the umask."""
    from tdescope.app.system.private_files import open_new_private

    with open_new_private(path) as fh:
        fh.write(data)


def summary_json(s, written: int) -> dict:
    """The closing JSON line of ``capture --json``: backend, counts, losses, time in probes; with eBPF,
    ``tally``: where every probe hit went (its terms add up to ``hits``, see :mod:`tdescope.app.probe.tally`)."""
    from tdescope.app.probe.stats import EbpfStats
    from tdescope.app.probe.tally import tally_of

    tally = tally_of(s.counters)
    probe = s.counters.probe if s.counters else None
    ebpf = probe if isinstance(probe, EbpfStats) else None  # gdb's helper counts hits only
    return {"backend": s.backend, "captures": written, "reason": s.reason, "symbol": s.armed_symbol,
            "stopped_ms": round(s.stopped_s * 1000, 3), "arming_stop_ms": round(s.arming_stop_s * 1000, 3),
            "total_stopped_ms": round((s.stopped_s + s.arming_stop_s) * 1000, 3),
            "hits": probe.hits if probe else None,
            "lost": tally.lost if tally else (0 if s.backend == "ebpf" else None),
            "sampled_out": ebpf.sampled_out if ebpf else None, "rate_capped": ebpf.rate_capped if ebpf else None,
            "tally": tally.to_json() if tally else None,
            "threads": s.threads, "longest_thread_stop_ms": round(s.longest_stop_s * 1000, 3),
            "most_stopped_thread_ms": round(s.most_stopped_s * 1000, 3)}


def summary_line(s) -> str:
    """``capture``'s closing words after the count: what the probe cost the target, and with eBPF
    where every hit went (the terms add up to the hits)."""
    from tdescope.app.probe.stats import GdbStats
    from tdescope.app.probe.tally import tally_of

    if s is None:
        return ""
    if s.backend == "ebpf":
        tally = tally_of(s.counters)
        where = tally.line() if tally else "0 hits"  # no counts from the probe: it saw none
        return f" with eBPF: probes added {s.stopped_s * 1000:.1f} ms to the target; {where}"
    total = (s.stopped_s + s.arming_stop_s) * 1000
    felt = (f"; /proc: the longest stop of any of its {s.threads} threads {s.longest_stop_s * 1000:.1f} ms, "
            f"the most stopped thread {s.most_stopped_s * 1000:.1f} ms in all" if s.threads else "")
    probe = s.counters.probe if s.counters is not None else None
    reinserted = probe.reinserted if isinstance(probe, GdbStats) else 0
    back = (f"; the kernel took the probe out {reinserted} time(s) (a uprobe at the same place ended in another "
            f"process) and it was put back: hits in between were missed" if reinserted else "")
    return (f", target stopped {total:.1f} ms in all ({s.arming_stop_s * 1000:.0f} ms while gdb attached and armed, "
            f"{s.stopped_s * 1000:.1f} ms in probe hits){felt}{back}")
