"""The examples shipped in examples/ run and print what they promise."""

import pathlib
import runpy

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def test_placement_roundtrip_example(capsys) -> None:
    runpy.run_path(str(EXAMPLES / "placement_roundtrip.py"), run_name="__main__")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("placement_id sha256:") and len(out[0].split()[1]) == len("sha256:") + 64
    assert out[1].startswith("digest       ") and len(out[1].split()[1]) == 64
    assert out[2].startswith("json bytes   ")
