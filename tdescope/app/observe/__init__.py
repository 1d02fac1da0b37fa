"""Observation of a target: samplers started together, and what was observed of a run."""
