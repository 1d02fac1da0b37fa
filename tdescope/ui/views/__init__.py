"""Custom views: hex and page views, flame graph, disassembly, entropy strip, A/B results, replay bar."""
