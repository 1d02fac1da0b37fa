"""tdescope's benchmarks: `make bench` (full) and `make bench-quick` (fewer repetitions)."""
