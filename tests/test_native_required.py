"""The package refuses to import without its C extension (no silent pure-Python fallback)."""

import subprocess
import sys
import textwrap


def test_import_fails_loudly_when_the_extension_is_missing() -> None:
    script = textwrap.dedent(
        """
        import importlib.abc, sys

        class BlockNative(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "mooncake.reshard._native":
                    raise ImportError("simulated missing extension")
                return None

        sys.meta_path.insert(0, BlockNative())
        try:
            import mooncake.reshard.weight  # noqa: F401
        except ImportError as exc:
            print("IMPORT-ERROR:", exc)
        else:
            print("IMPORTED")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    out = result.stdout.strip()
    assert out.startswith("IMPORT-ERROR:"), out
    assert "could not import its C extension mooncake.reshard._native" in out
    assert "simulated missing extension" in out
    assert "no pure-Python fallback" in out
