"""The window's docks: each a QDockWidget over one view of a session (captures, hotspots, waits...)."""
