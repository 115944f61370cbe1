"""The reference's side of the conformance suite: a child process that imports the released
reference's ``mooncake.reshard`` (its directory first on ``sys.path``) and answers requests from
the test process, one at a time, over stdin and stdout.

A request is ``(name, args)`` with ``name`` an outcome function of ``outcomes.py``; the answer is
its outcome. Both travel as pickles behind an 8-byte length (the layouts are the test helpers'
plain dataclasses, which both processes import from ``tests/``). The first answer, before any
request, says which package was imported, so that the suite can refuse to compare us with
ourselves.

    python conformance/reference_server.py REFERENCE_DIR TESTS_DIR
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
from typing import Any, BinaryIO


def send(stream: BinaryIO, value: Any) -> None:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(payload)) + payload)
    stream.flush()


def receive(stream: BinaryIO) -> Any:
    """The next value, or ``None`` at the end of the stream."""
    head = stream.read(8)
    if len(head) < 8:
        return None
    (size,) = struct.unpack("<Q", head)
    payload = stream.read(size)
    if len(payload) != size:
        raise EOFError("the request stream ended inside a request")
    return pickle.loads(payload)


def main() -> int:
    reference, tests = sys.argv[1], sys.argv[2]
    fuzz = os.path.join(os.path.dirname(tests), "fuzz")  # (pyfuzz.py: the hostile constructor calls)
    sys.path[:0] = [reference, tests, os.path.dirname(os.path.abspath(__file__)), fuzz]
    import resource

    # (a fault of the release must not take the machine: e.g. a huge size it enumerates)
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    import mooncake.reshard.weight as weight

    import outcomes

    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(weight.__file__)))
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    send(answers, {"package_dir": package_dir,
                   "native": any(name.startswith("_native") for name in os.listdir(package_dir))})
    while True:
        request = receive(requests)
        if request is None:
            return 0
        name, args = request
        send(answers, getattr(outcomes, name)(*args))


if __name__ == "__main__":
    sys.exit(main())
