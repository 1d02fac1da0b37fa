"""The eBPF capture backend (uprobes, a ring buffer, libbpf through ctypes)."""
