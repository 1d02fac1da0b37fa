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
from tdescope.app.engines.capabilities import Ability, abilities, has_ability
from tdescope.app.engines.registry import EngineLoadError, discover_engines, open_session

__all__ = [
    "Ability",
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
    "abilities",
    "discover_engines",
    "has_ability",
    "open_session",
]
