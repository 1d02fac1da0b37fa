"""Function glossaries: what a symbol seen in a profile does, in one sentence.

Glossaries are data files, ``tdescope/resources/glossary/<name>.json``, each a
flat JSON object ``{"symbol": "sentence", ...}``. A key ending in ``*`` is a
prefix pattern (``"sqlcipher_openssl_*"``). Engines name the glossaries they
want (``load_glossary("sqlite", "openssl")``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources

from tdescope.app.errors import UserError

__all__ = ["load_glossary", "describe", "base_symbol"]

_PACKAGE = "tdescope.resources"

# Compiler clones (.isra.0, .constprop.3, .part.1, .cold, .lto_priv.0) and
# symbol versions (@plt, @@GLIBC_2.17, @GLIBC_2.2.5) do not change what the
# function does, so they are peeled off before looking it up.
_VERSION = re.compile(r"@.*$")
_CLONE = re.compile(r"(\.(isra|constprop|part|cold|lto_priv|localalias|llvm)(\.\d+)?)+$")


def base_symbol(symbol: str) -> str:
    """Strip symbol versions, ``@plt`` and compiler clone suffixes.

    Examples
    --------
    >>> base_symbol("clock_gettime@@GLIBC_2.17")
    'clock_gettime'
    >>> base_symbol("balance_nonroot.isra.0")
    'balance_nonroot'
    >>> base_symbol("memcpy@plt")
    'memcpy'
    """
    name = _VERSION.sub("", symbol)
    # A clone suffix may be followed by another one (".constprop.0.isra.0").
    prev = None
    while prev != name:
        prev, name = name, _CLONE.sub("", name)
    return name


def load_glossary(*names: str) -> dict[str, str]:
    """Load and merge the named glossaries (later names win on duplicates).

    Parameters
    ----------
    *names : str
        Glossary names, e.g. ``"sqlite"``, ``"openssl"``.

    Returns
    -------
    dict
        Symbol (or ``prefix*`` pattern) -> one-sentence description.

    Raises
    ------
    UserError
        When a glossary does not exist or is not a JSON object of strings.
    """
    out: dict[str, str] = {}
    root = resources.files(_PACKAGE).joinpath("glossary")
    for name in names:
        res = root.joinpath(f"{name}.json")
        try:
            data = json.loads(res.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"no glossary named {name!r} in tdescope/resources/glossary") from None
        except json.JSONDecodeError as err:
            raise UserError(f"glossary {name!r} is not valid JSON: {err}") from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise UserError(f"glossary {name!r} must be a JSON object of strings")
        out.update(data)
    return out


def describe(symbol: str, glossary: Mapping[str, str]) -> str:
    """One sentence about ``symbol``, or ``""`` when the glossary has none.

    Lookup order: the exact name, then the name without versions and clone
    suffixes, then prefix patterns (``"name*"``), longest prefix first.
    """
    if symbol in glossary:
        return glossary[symbol]
    base = base_symbol(symbol)
    if base in glossary:
        return glossary[base]
    best = ""
    best_len = -1
    for key, text in glossary.items():
        if key.endswith("*"):
            prefix = key[:-1]
            if len(prefix) > best_len and base.startswith(prefix):
                best, best_len = text, len(prefix)
    return best
