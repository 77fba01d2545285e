"""docs/architecture.md names every package the import contracts name.

The contracts (``[tool.importlinter]`` in pyproject.toml, checked by ``lint-imports``) are the
layers as the code keeps them; docs/architecture.md is the layers as a newcomer reads them. A
contract that names a package or layer the document does not mention (by its dotted name,
``mcpclient.engine``, or its path, ``mcpclient/engine/``) fails here, naming it: a new layer
comes with its line in the tour.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from tests.support.processes import ROOT

# The keys of import-linter's contract types that hold module names (layers, forbidden,
# independence, protected): each a list of names, or of layers ("a | b", "a : b", "(optional)").
NAME_KEYS = ("containers", "layers", "source_modules", "forbidden_modules", "modules")


def contracts() -> tuple[list[str], list[dict[str, Any]]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    roots = list(config.get("root_packages", [config.get("root_package")]))
    return roots, config["contracts"]


def layer_names(layer: str) -> list[str]:
    """``"admin | views"`` -> ``["admin", "views"]``; ``"(optional)"`` -> ``["optional"]``."""
    return [part.strip().strip("()").strip() for part in re.split(r"[|:]", layer) if part.strip()]


def named_packages(roots: list[str], contract: dict[str, Any]) -> set[str]:
    """The project's modules a contract names, in full (a container's layers under it)."""
    names: set[str] = set()
    containers = contract.get("containers", [])
    for key in NAME_KEYS:
        for entry in contract.get(key, []):
            for name in layer_names(entry):
                if key == "layers" and containers:
                    names.update(f"{container}.{name}" for container in containers)
                else:
                    names.add(name)
    return {
        name for name in names if "*" not in name and name.split(".")[0] in roots
    }  # not the external packages a contract forbids (django, ...)


def mentioned(name: str, text: str) -> bool:
    """``a.b`` named by its dotted name (``a.b``, ``a.b.c``) or its path (``a/b/``, ``a/b.py``)."""
    dotted = rf"(?<![\w.]){re.escape(name)}(?![\w])"
    path = rf"(?<![\w/]){re.escape(name.replace('.', '/'))}(?:/|\.py)"
    return re.search(dotted, text) is not None or re.search(path, text) is not None


def test_the_architecture_document_names_every_package_of_the_contracts() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    roots, every = contracts()
    assert every, "no [[tool.importlinter.contracts]] in pyproject.toml"
    missing = {
        name: contract["id"]
        for contract in every
        for name in sorted(named_packages(roots, contract))
        if not mentioned(name, text)
    }
    assert not missing, "docs/architecture.md does not mention " + ", ".join(
        f"{name} (contract {contract})" for name, contract in sorted(missing.items())
    )


def test_a_package_the_document_does_not_name_is_found() -> None:
    # The check itself: a layer added to a contract and nowhere in the text is caught.
    roots, _ = contracts()
    contract = {"id": "x", "type": "layers", "containers": ["mcpclient"], "layers": ["gateway | engine"]}
    names = named_packages(roots, contract)
    assert names == {"mcpclient", "mcpclient.gateway", "mcpclient.engine"}
    text = "The hub is `mcpclient.engine.hub`; the views sit in mcpclient/views.py."
    assert [name for name in sorted(names) if not mentioned(name, text)] == ["mcpclient.gateway"]
    assert mentioned("mcpclient.views", text) and not mentioned("mcpclient.view", text)
    assert not mentioned("mcpclient.engine", "mcpclient.engines") and not mentioned("chat", "boocode.chat")
