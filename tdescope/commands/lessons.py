"""``tdescope lessons``: the experiments of the source documents, listed or run headless to a result card."""

from __future__ import annotations

import argparse
import json
import sys

from tdescope.app.errors import UserError
from tdescope.app.events import LessonVerdict
from tdescope.commands._args import engine_named
from tdescope.commands._ssh import add_ssh_arguments, ssh_host
from tdescope.commands._stdout import emit

HELP = "the lessons (published experiments): list them, or run one to its result card (published vs ours)"


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object per lesson")
    sub = parser.add_subparsers(dest="lessons_command", metavar="run")
    run = sub.add_parser("run", help="run one lesson and print its result card",
                         description="run one lesson and print its result card")
    run.add_argument("lesson", metavar="ID", help="the lesson's id (see `tdescope lessons`)")
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--lab", metavar="ENGINE",
                       help="start ENGINE's lab (sqlcipher, mariadb, pg-tde) and run it there")
    where.add_argument("--dsn", help="connect to this server (with --engine) and run it there")
    run.add_argument("--engine", default="postgres", help="the engine behind --dsn (default postgres)")
    run.add_argument("--target-pid", type=int, help=argparse.SUPPRESS)
    run.add_argument("--allow-critical", action="store_true", help=argparse.SUPPRESS)
    run.add_argument("--fast", action="store_true", help="small parameters: seconds, not minutes (noisier figures)")
    run.add_argument("--backend", choices=("auto", "ebpf", "gdb"), default="auto",
                     help="what places the probes of lessons that count or show pages (default auto)")
    run.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                     help="the card as one JSON object (figures by name: ratio_median, first_scan_decrypts...)")
    add_ssh_arguments(run)


def listing(lessons) -> list[dict]:
    """The ``lessons --json`` objects: id, title, engines, needs, source and published figures."""
    return [{"id": lesson.id, "title": lesson.title, "engines": list(lesson.engines), "needs": lesson.needs,
             "question": lesson.question, "source": lesson.source(), "expected": lesson.expected,
             "published": [{"label": p.label, "text": p.text, "value": p.value} for p in lesson.published]}
            for lesson in lessons]


def card_json(card) -> dict:
    """A result card as JSON: its lines, verdict and figures (figures also at the top level)."""
    return {**card.figures, "lesson": card.lesson, "title": card.title, "engine": card.engine,
            "verdict": card.verdict, "verdict_text": card.verdict_text, "published": list(card.published),
            "ours": list(card.ours), "evidence": list(card.evidence), "figures": card.figures,
            "source": card.source, "note": card.note, "params": card.params}


def run(args) -> int:
    from tdescope.app.lessons import lesson_named, load_lessons

    if args.lessons_command != "run":
        lessons = load_lessons()
        if args.json:
            for item in listing(lessons):
                emit(json.dumps(item))
        else:
            for lesson in lessons:
                engines = ", ".join(lesson.engines) or lesson.needs
                emit(f"{lesson.id:<22} {lesson.title}  [{engines}]")
                emit(f"{'':<22} published: " + "; ".join(f"{p.label}: {p.text}" for p in lesson.published))
        return 0
    ssh_host(args)  # a bad --ssh DEST, or ssh options without it: one line before anything starts
    lesson = lesson_named(args.lesson)
    engine_name = args.lab or args.engine
    if engine_name not in lesson.bindings:
        from tdescope.app.lessons import cannot_run_card

        card = cannot_run_card(lesson, engine_name)
        emit(json.dumps(card_json(card)) if args.json else card.text())
        raise UserError(f"lesson {lesson.id} cannot run on {engine_name}: {card.verdict_text}")
    return _run_one(args, lesson, engine_named(engine_name))


def _run_one(args, lesson, engine) -> int:
    from tdescope.app.engines.api import ConnectParams
    from tdescope.app.engines.registry import open_session
    from tdescope.app.lessons import LessonRun, run_lesson
    from tdescope.commands._dsn import open_dsn_session

    def on_step(done: int, total: int, text: str) -> None:
        if sys.stderr.isatty():
            print(f"step {done}/{total}: {text}", file=sys.stderr, flush=True)

    from tdescope.commands._ssh import agent_windows, connect, lost_line

    agent = connect(args) if args.ssh else None  # the server on the host: probes there, SQL through ssh
    try:
        session = open_dsn_session(engine, args, agent) if args.dsn else \
            open_session(engine, ConnectParams(lab=True))
        try:
            over = {} if agent is None else {"windows": agent_windows(agent, {}), "remote": agent.label}
            if agent is not None:
                print(f"tdescope: on {agent.label}: captures through the agent there; perf hotspots and the "
                      "server's CPU per round are not recorded", file=sys.stderr, flush=True)
            lesson_run = LessonRun(lesson, engine, session, fast=args.fast, backend_choice=args.backend,
                                   on_step=on_step, **over)
            try:
                card = run_lesson(lesson_run)
            except KeyboardInterrupt:
                lesson_run.cancel()
                raise
            except UserError as exc:
                raise UserError(lost_line(agent, str(exc)) if agent is not None else str(exc)) from None
        finally:
            session.close()
    finally:
        if agent is not None:
            agent.close()
    emit(json.dumps(card_json(card)) if args.json else card.text())
    if card.verdict in (LessonVerdict.FAILED, LessonVerdict.CANNOT_RUN):
        raise UserError(f"lesson {lesson.id}: {card.verdict_text}")
    return 0
