"""``--ssh DEST`` and its ssh options, shared by the commands that can work on another host.

The user's own OpenSSH carries everything (:class:`~tdescope.app.remote.ssh.SshHost`): an alias from
``~/.ssh/config``, jump hosts, ssh-agent keys. ``--ssh-option KEY=VALUE`` passes ``-o KEY=VALUE`` to
ssh, ``--ssh-config FILE`` passes ``-F FILE``; ``--ssh-prompt`` lets ssh ask for a password or a
passphrase on the terminal (by default ``BatchMode=yes``: it never waits on a prompt).
"""

from __future__ import annotations

import re

from tdescope.app.errors import UserError

__all__ = ["add_ssh_arguments", "ssh_host"]

_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9]*[= ].*")


def add_ssh_arguments(parser) -> None:
    """``--ssh DEST``, ``--ssh-option KEY=VALUE`` (repeatable), ``--ssh-config FILE``, ``--ssh-prompt``."""
    group = parser.add_argument_group("remote host (ssh)")
    group.add_argument("--ssh", metavar="DEST",
                       help="work on this host over ssh: [user@]host or an alias from your ssh config; the agent is "
                            "copied there once and runs with the host's python3 (sudo -n unless you log in as root)")
    group.add_argument("--ssh-option", action="append", default=[], metavar="KEY=VALUE",
                       help="passed to ssh as -o KEY=VALUE (repeatable), e.g. ProxyJump=bastion or Compression=yes")
    group.add_argument("--ssh-config", metavar="FILE", help="passed to ssh as -F FILE")
    group.add_argument("--ssh-prompt", action="store_true",
                       help="let ssh ask for a password or passphrase on this terminal (default: BatchMode=yes)")


def ssh_options(args) -> tuple[str, ...]:
    """The ssh words ``args`` ask for (``-F FILE``, ``-o KEY=VALUE`` …)."""
    words: list[str] = []
    if getattr(args, "ssh_config", None):
        words += ["-F", args.ssh_config]
    for opt in getattr(args, "ssh_option", None) or ():
        if not _OPTION.fullmatch(opt):
            raise UserError(f"--ssh-option: not an ssh option: {opt!r} (give KEY=VALUE, e.g. Port=2222)")
        words += ["-o", opt]
    return tuple(words)


def ssh_host(args):
    """The :class:`~tdescope.app.remote.ssh.SshHost` for ``--ssh`` (not yet connected), or None without it."""
    if not getattr(args, "ssh", None):
        if getattr(args, "ssh_option", None) or getattr(args, "ssh_config", None):
            raise UserError("--ssh-option and --ssh-config need --ssh DEST")
        return None
    from tdescope.app.remote.ssh import SshHost

    return SshHost(args.ssh, ssh_options(args), allow_prompts=bool(getattr(args, "ssh_prompt", False)))
