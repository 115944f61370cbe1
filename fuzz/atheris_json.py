"""Coverage-guided fuzzing of ``weight_placement_from_json`` and the public constructors with
atheris (libFuzzer for Python). Contract and checks: see ``pyfuzz.py``.

    python fuzz/atheris_json.py fuzz/corpus/json -max_total_time=60

Input bytes: first byte < 0xC0 -> the rest is the JSON text (UTF-8, lone surrogates allowed via
``surrogatepass``); otherwise the rest seeds one structured case (a mutated seed document or a
hostile constructor call). Findings abort with the offending input saved by libFuzzer.
"""

from __future__ import annotations

import os
import random
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

with atheris.instrument_imports():
    import mooncake.reshard.weight  # noqa: F401  (instrument the package)
    import pyfuzz

DOCS = pyfuzz.seed_documents()


def one_input(data: bytes) -> None:
    if not data:
        return
    if data[0] < 0xC0:
        text = data[1:].decode("utf-8", "surrogatepass") if _utf8(data[1:]) else data[1:].decode("latin-1")
        if pyfuzz.known_finding(text):
            return
        pyfuzz.check_json_text(text)
        return
    rng = random.Random(data[1:])
    if data[0] & 1:
        text = pyfuzz.json_case(rng, DOCS)
        if not pyfuzz.known_finding(text):
            pyfuzz.check_json_text(text)
    else:
        pyfuzz.fuzz_constructor_once(rng)


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8", "surrogatepass")
        return True
    except UnicodeDecodeError:
        return False


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
