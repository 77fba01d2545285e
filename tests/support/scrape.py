"""What a ``/metrics`` endpoint said: Prometheus text decoded with the client library's own parser.

    figures = Figures.parse(body)
    figures.value("boocode_turns_total", status="complete")    # 0.0 when the series is absent

The process's registry is shared by every test a worker runs, so a test compares two scrapes
(:meth:`Figures.delta`) rather than reading absolute values. ``scrape()`` reads the test process's
own ``/metrics`` with ``TOKEN`` (the test sets ``settings.METRICS_TOKEN`` to it).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.test import AsyncClient
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "a-metrics-token-for-the-tests"


@dataclass(frozen=True)
class Figures:
    """Every sample of one scrape, by name and labels."""

    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]

    @classmethod
    def parse(cls, text: str | bytes) -> Figures:
        body = text.decode() if isinstance(text, bytes) else text
        samples = {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(body)
            for sample in family.samples
        }
        return cls(samples)

    def value(self, name: str, **labels: str) -> float:
        """The sample ``name{labels}`` (exactly those labels), 0.0 when absent."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def has(self, name: str, **labels: str) -> bool:
        return (name, frozenset(labels.items())) in self.samples

    def delta(self, before: Figures, name: str, **labels: str) -> float:
        """How much ``name{labels}`` grew since ``before``."""
        return self.value(name, **labels) - before.value(name, **labels)

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}


async def scrape() -> Figures:
    """What this process's ``/metrics`` says now (read with ``TOKEN``, as Prometheus would)."""
    response = await AsyncClient().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.content[:300]
    return Figures.parse(response.content)
