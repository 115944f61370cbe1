"""Shared pytest configuration: hypothesis profiles.

Select a profile with ``HYPOTHESIS_PROFILE``:

* ``ci`` (default): modest example counts so the whole suite stays within a few minutes on two
  cores; no deadline (the machine is shared, timings are noisy); deterministic (derandomized) so a
  CI failure reproduces locally.
* ``nightly``: many more examples, randomized, for long exploratory runs.
* ``dev``: a handful of examples, for quick iteration while writing tests.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Iterator

import pytest
from hypothesis import HealthCheck, settings

# the helper modules (strategies, oracles, layout_model, known_answers) live beside the tests
sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "nightly",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "dev",
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move what collection left alive (the test modules, their functions, hypothesis's
    strategies: some 250,000 objects) out of the cyclic collector's view.

    Many tests call ``gc.collect()`` (a collector-safety test calls it hundreds of times), and a
    full collection visits every tracked object: 0.2 s each on this suite's heap against a few
    milliseconds in a fresh process, so collection's objects cost those tests 30 times their own
    time. Frozen objects are still freed by reference counting; only cycles among them are never
    collected, and ``gc.get_objects()`` no longer lists them (no test looks for an object that
    existed before the tests ran)."""
    gc.collect()
    gc.freeze()


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cyclic collector disabled for the test (a collection between building values and
    checking their collector state would untrack tuples itself)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
