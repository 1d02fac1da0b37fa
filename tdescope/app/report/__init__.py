"""Reports of a recorded session: the model and its SVG plots."""
