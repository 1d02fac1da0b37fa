"""Oracle engine plugin: pure-Python parsers and decoders for Oracle's own text and bytes.

Oracle cannot run on the machines tdescope is built on, so everything here is
tested against recorded text written in Oracle's formats (10046 SQL trace,
``alter system dump datafile ... block ...`` output) and against block bytes
published in the seed material; see each module for what is not verified
against a live instance.
"""

from tdescope.plugins.oracle.engine import OracleEngine

__all__ = ["ENGINE"]

ENGINE = OracleEngine()
