"""Wait events seen from the OS (/proc) and counted one way."""
