"""``tdescope agent``: build the privileged half's zipapp, or be the agent on this process's stdio."""

from __future__ import annotations

from tdescope.commands._stdout import emit

HELP = "the privileged half for a database host: build tdescope-agent.pyz, or serve its protocol on stdin/stdout"


def add_arguments(parser) -> None:
    parser.add_argument("action", choices=("build", "serve"),
                        help="build: write the zipapp (run it on the host as: sudo python3 tdescope-agent.pyz); "
                             "serve: speak the agent protocol on stdin/stdout (what the zipapp does)")
    parser.add_argument("dest", nargs="?", default="dist", help="build: a directory or a .pyz path (default: dist)")


def run(args) -> int:
    if args.action == "serve":
        from tdescope.app.remote.agent_main import main
        return main()
    from tdescope.app.remote.agent_build import agent_hash, build_agent

    path = build_agent(args.dest)
    emit(f"{path}  sha256 {agent_hash(path)}")
    return 0
