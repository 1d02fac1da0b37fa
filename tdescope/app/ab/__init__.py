"""A/B runs a trainer can trust: interleaved rounds, a warm-up, medians with intervals."""
