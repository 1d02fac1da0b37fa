"""The machine and its processes: /proc, ELF symbols and load bases, secrets hygiene, critical processes."""
