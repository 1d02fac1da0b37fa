"""Headless subcommands of ``tdescope``, one module each.

A command module has ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``; it raises :class:`tdescope.app.errors.UserError` for
anything the user can fix. :data:`COMMANDS` lists them in ``--help`` order.
"""

COMMANDS = {
    "doctor": "tdescope.commands.doctor",
    "capture": "tdescope.commands.capture",
    "ab": "tdescope.commands.ab",
    "lessons": "tdescope.commands.lessons",
    "top": "tdescope.commands.top",
    "waits": "tdescope.commands.waits",
    "record": "tdescope.commands.record",
    "report": "tdescope.commands.report",
    "info": "tdescope.commands.info",
    "oracle": "tdescope.commands.oracle",
}
