"""The eBPF wait tracer: syscalls and off-CPU time of one process, timed, sized and aggregated in the kernel."""
