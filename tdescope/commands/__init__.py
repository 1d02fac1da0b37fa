"""Headless subcommands of ``tdescope``, one module each.

A command module has ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``; it raises :class:`tdescope.app.errors.UserError` for
anything the user can fix. :data:`COMMANDS` lists them in ``--help`` order;
:func:`all_commands` adds those the engine plugins declare.
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
    "agent": "tdescope.commands.agent",
    "desktop-install": "tdescope.commands.desktop_install",
}

#: Entry-point group through which an engine plugin adds a subcommand of its own (a module with the
#: same ``HELP``/``add_arguments``/``run``), e.g. ``tdescope oracle``: commands/ never imports a plugin.
PLUGIN_COMMANDS_GROUP = "tdescope.commands"


def all_commands() -> dict[str, str]:
    """:data:`COMMANDS`, then the installed plugins' subcommands (name -> module), in ``--help`` order."""
    from importlib.metadata import entry_points

    found = dict(COMMANDS)
    for ep in sorted(entry_points(group=PLUGIN_COMMANDS_GROUP), key=lambda ep: ep.name):
        found.setdefault(ep.name, ep.value)
    return found
