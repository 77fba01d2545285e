"""The serving processes' start-up heap, frozen out of the cyclic collector's way (runtime.heap)."""

from __future__ import annotations

import gc
import json
import os
import subprocess

import pytest

from mcpclient.runtime.heap import YOUNG_THRESHOLD, freeze_start_up
from tests.support.processes import REAL_PYTHON, ROOT


def test_what_lives_at_start_up_is_frozen_and_young_collections_come_less_often() -> None:
    threshold = gc.get_threshold()
    try:
        frozen = freeze_start_up()
        assert frozen == gc.get_freeze_count() > 10_000  # the test process's modules, Django's...
        unreachable = [[]]
        unreachable[0].append(unreachable)  # a cycle made after the freeze is still collected
        del unreachable
        assert gc.collect() >= 1
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *threshold[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.processes
def test_daphnes_application_freezes_its_start_up() -> None:
    probe = "import gc, json, boocode.asgi; print(json.dumps([gc.get_freeze_count(), gc.get_threshold()[0]]))"
    out = subprocess.run(
        [REAL_PYTHON, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "boocode.settings"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    frozen, young = json.loads(out.splitlines()[-1])
    assert frozen > 50_000 and young == YOUNG_THRESHOLD
