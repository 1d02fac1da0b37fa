"""The privileged half over a pipe: the agent's protocol, its zipapp, and the workbench's client."""
