"""The engine contract and plugin discovery."""

from tdescope.app.engines.api import (
    ArgRef,
    ConnectParams,
    DecodedField,
    DecodedPage,
    Engine,
    EngineSession,
    Inventory,
    PageDecoder,
    ProbeRecipe,
    WaitSource,
    Workload,
    WorkloadControl,
)
from tdescope.app.engines.registry import EngineLoadError, discover_engines

__all__ = [
    "ArgRef",
    "ConnectParams",
    "DecodedField",
    "DecodedPage",
    "Engine",
    "EngineLoadError",
    "EngineSession",
    "Inventory",
    "PageDecoder",
    "ProbeRecipe",
    "WaitSource",
    "Workload",
    "WorkloadControl",
    "discover_engines",
]
