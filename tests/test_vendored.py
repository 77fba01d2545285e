"""The vendored MCP Apps bridge (static/vendor/ext-apps/) is what scripts/vendor-ext-apps wrote.

VENDORED.json records the package, its version, the names the module exports and the bundle's
sha256 and size; a hand edit of app-bridge.js, or a bundle refreshed without its record, fails
here. The fix in both cases is to run ``scripts/vendor-ext-apps [VERSION]`` again.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import ROOT

VENDOR = ROOT / "static" / "vendor" / "ext-apps"
BUNDLE = VENDOR / "app-bridge.js"
REFRESH = "run scripts/vendor-ext-apps to rebuild it and its record"

# esbuild's minified closing statement: export{Cv as AppBridge,Ov as PostMessageTransport,...};
EXPORT_CLAUSE = re.compile(r"export\s*\{([^{}]*)\}\s*;?")
EXPORT_ITEM = re.compile(r"^(?:[\w$]+\s+as\s+)?([\w$]+)$")


@pytest.fixture(scope="module")
def record() -> dict[str, Any]:
    return json.loads((VENDOR / "VENDORED.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def bundle() -> bytes:
    return BUNDLE.read_bytes()


def exported_names(source: str) -> list[str]:
    """The names in the module's last ``export{...}`` statement (the legal comments come after it)."""
    clauses = EXPORT_CLAUSE.findall(source)
    assert clauses, "app-bridge.js has no export{...} statement"
    names = []
    for item in clauses[-1].split(","):
        match = EXPORT_ITEM.match(item.strip())
        assert match, f"unexpected export item {item!r}"
        names.append(match.group(1))
    return names


def test_bundle_matches_its_record(record: dict[str, Any], bundle: bytes) -> None:
    digest = hashlib.sha256(bundle).hexdigest()
    assert digest == record["sha256"], f"app-bridge.js has sha256 {digest}, not VENDORED.json's: {REFRESH}"
    assert len(bundle) == record["bytes"], (
        f"app-bridge.js has {len(bundle)} bytes, not {record['bytes']}: {REFRESH}"
    )


def test_first_line_names_the_version(record: dict[str, Any], bundle: bytes) -> None:
    first = bundle.split(b"\n", 1)[0].decode()
    assert first.startswith("/* ") and first.endswith(" */"), first
    assert f"{record['package']} {record['version']} {record['export']}" in first, first
    assert record["bundled"][record["package"]] == record["version"]


def test_exports_exactly_the_recorded_names(record: dict[str, Any], bundle: bytes) -> None:
    assert record["exports"] == ["AppBridge", "PostMessageTransport", "buildAllowAttribute"]
    assert sorted(exported_names(bundle.decode())) == sorted(record["exports"])


def test_export_clause_parsing() -> None:
    source = "var a=1;export{Cv as AppBridge,$E as buildAllowAttribute,Plain};\n/*! legal */\n"
    assert exported_names(source) == ["AppBridge", "buildAllowAttribute", "Plain"]


def test_license_is_shipped(record: dict[str, Any]) -> None:
    license_text = (VENDOR / "LICENSE").read_text(encoding="utf-8")
    assert "MIT" in license_text
    for name, version in record["bundled"].items():
        if name != record["package"]:
            assert f"==== {name} {version} " in license_text, f"LICENSE lacks {name}'s: {REFRESH}"


def test_vendor_folder_holds_only_the_three_files() -> None:
    assert sorted(path.name for path in VENDOR.iterdir()) == ["LICENSE", "VENDORED.json", "app-bridge.js"]


def test_script_is_executable() -> None:
    script: Path = ROOT / "scripts" / "vendor-ext-apps"
    assert script.stat().st_mode & 0o111, "scripts/vendor-ext-apps is not executable"
