"""The conformance suite: our package against the released pure-Python reference.

Run it with the reference unpacked by ``benchmarks/reference_side_by_side.py --fetch DIR``::

    MOONCAKE_RESHARD_REFERENCE=DIR python -m pytest conformance

The reference answers in a child process of its own (``reference_server.py``: both packages are
named ``mooncake.reshard``). Without ``MOONCAKE_RESHARD_REFERENCE`` the suite errors: it exists to
compare, and a run that compared nothing must not pass.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Callable, Iterator

import pytest
from hypothesis import HealthCheck, settings

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
sys.path[:0] = [TESTS, HERE]  # the test helpers (layout_model, strategies, ...) and outcomes.py

import reference_server  # noqa: E402  (beside this file)

settings.register_profile(
    "conformance",
    max_examples=int(os.environ.get("CONFORMANCE_EXAMPLES", "150")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile("conformance")

Ask = Callable[..., Any]


@pytest.fixture(scope="session")
def reference() -> Iterator[Ask]:
    """``ask(name, *args)``: the reference's outcome (``outcomes.py``'s function ``name``)."""
    directory = os.environ.get("MOONCAKE_RESHARD_REFERENCE")
    if not directory:
        pytest.fail("set MOONCAKE_RESHARD_REFERENCE to a directory made by "
                    "`python benchmarks/reference_side_by_side.py --fetch DIR`")
    import mooncake.reshard._native  # noqa: F401  (ours: the test process must import our C core)

    server = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "reference_server.py"), directory, TESTS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        hello = reference_server.receive(server.stdout)
        if hello is None:
            pytest.fail(f"the reference server in {directory} did not start")
        inside = os.path.realpath(hello["package_dir"]).startswith(os.path.realpath(directory) + os.sep)
        if not inside or hello["native"]:
            pytest.fail(f"the reference server imported {hello['package_dir']} (native: {hello['native']}), "
                        f"not the reference in {directory}")

        def ask(name: str, *args: Any) -> Any:
            reference_server.send(server.stdin, (name, args))
            answer = reference_server.receive(server.stdout)
            if answer is None:
                raise RuntimeError("the reference server exited")
            return answer

        yield ask
    finally:
        server.stdin.close()
        server.wait(timeout=60)
