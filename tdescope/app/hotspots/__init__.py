"""Live hotspots: perf sampling, perf script parsing, profiles, the crypto rule, disassembly, glossaries."""
