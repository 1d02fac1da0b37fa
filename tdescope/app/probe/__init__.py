"""Capture windows: the recipe spec, the probe protocol and backends, the spool, page summaries."""
