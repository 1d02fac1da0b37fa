"""The workbench on a laptop, the probe on the database host: ssh and the agent protocol."""
