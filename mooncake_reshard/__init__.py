"""mooncake.reshard: plan and bind model-weight transfers between parallel layouts.

The algorithms live in the C extension ``mooncake.reshard._native``; this package
holds the typed public values. There is no pure-Python fallback: if the extension
cannot be imported, importing the package fails.
"""

try:
    from . import _native as _native  # noqa: F401  (imported for its side effect: fail loudly)
except ImportError as _exc:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "mooncake.reshard could not import its C extension mooncake.reshard._native "
        f"({_exc}). Reinstall the package (pip install mooncake-reshard, or "
        "pip install . from a source checkout, which needs a C compiler and OpenSSL "
        "libcrypto headers); there is no pure-Python fallback."
    ) from _exc

from .contracts import PlacementManifest, ResourceKind, ResourceManifest, RuntimeBindingManifest

__all__ = ["ResourceKind", "ResourceManifest", "PlacementManifest", "RuntimeBindingManifest"]
