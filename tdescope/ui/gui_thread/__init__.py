"""What keeps the GUI thread free: background tasks, the event pump, the garbage collector's policy."""
