"""Build script for the ``mooncake.reshard._native`` stable-ABI extension.

Environment switches (documented in README.md):

* ``MOONCAKE_RESHARD_STRICT=1``   -Wall -Wextra -Wshadow -Werror (CI uses this)
* ``MOONCAKE_RESHARD_SANITIZE=1`` AddressSanitizer + UndefinedBehaviorSanitizer, -O1 -g
* ``MOONCAKE_RESHARD_DEBUG=1``    -O0 -g
* ``OPENSSL_PREFIX=/path``        where to find include/ and lib/ of OpenSSL libcrypto

Without the sanitizer or debug switch the build is -O2 -fvisibility=hidden (plus -fno-plt and
-falign-loops=32 on Linux): only ``PyInit__native`` is exported.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _pkg_config(*args: str) -> list[str] | None:
    if shutil.which("pkg-config") is None:
        return None
    try:
        out = subprocess.run(
            ["pkg-config", *args, "libcrypto"], check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.split()


def _libcrypto_flags() -> tuple[list[str], list[str]]:
    """Return (include_dirs, library_dirs) for libcrypto: env prefix, pkg-config, default."""
    prefix = os.environ.get("OPENSSL_PREFIX")
    if prefix:
        libdirs = [d for d in (os.path.join(prefix, "lib64"), os.path.join(prefix, "lib")) if os.path.isdir(d)]
        return [os.path.join(prefix, "include")], libdirs
    cflags = _pkg_config("--cflags")
    libs = _pkg_config("--libs-only-L")
    if cflags is not None and libs is not None:
        return [f[2:] for f in cflags if f.startswith("-I")], [f[2:] for f in libs if f.startswith("-L")]
    return [], []


class BuildExt(build_ext):
    """Fail early, with a message that says what to install, when libcrypto is missing."""

    def build_extensions(self) -> None:
        compiler = self.compiler
        probe_dir = os.path.join(self.build_temp, "probe")
        os.makedirs(probe_dir, exist_ok=True)
        probe = os.path.join(probe_dir, "probe_libcrypto.c")
        with open(probe, "w", encoding="ascii") as handle:
            handle.write("#include <openssl/evp.h>\nint main(void){return EVP_sha256()==0;}\n")
        ext = self.extensions[0]
        try:
            objects = compiler.compile([probe], output_dir=probe_dir, include_dirs=ext.include_dirs)
            compiler.link_executable(
                objects, "probe_libcrypto", output_dir=probe_dir,
                libraries=["crypto"], library_dirs=ext.library_dirs,
            )
        except Exception as exc:  # noqa: BLE001 - any compiler failure means the same thing
            raise SystemExit(
                "mooncake-reshard needs OpenSSL libcrypto and its headers (openssl/evp.h).\n"
                "Install them (Debian/Ubuntu: apt-get install libssl-dev pkg-config; "
                "Fedora: dnf install openssl-devel) or set OPENSSL_PREFIX to the OpenSSL "
                f"installation prefix.\nCompiler error: {exc}"
            ) from None
        super().build_extensions()


def _compile_args() -> tuple[list[str], list[str]]:
    cflags = ["-std=c11", "-Werror=implicit-function-declaration", "-fno-strict-aliasing"]
    ldflags: list[str] = []
    if os.environ.get("MOONCAKE_RESHARD_STRICT") == "1":
        cflags += ["-Wall", "-Wextra", "-Wshadow", "-Werror"]
    if os.environ.get("MOONCAKE_RESHARD_SANITIZE") == "1":
        san = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"]
        cflags += san + ["-O1", "-g"]
        ldflags += san
    elif os.environ.get("MOONCAKE_RESHARD_DEBUG") == "1":
        cflags += ["-O0", "-g"]
    else:
        cflags += ["-O2"]
        # Only PyInit__native is exported (PyMODINIT_FUNC marks it visible), and calls into
        # libpython go through the GOT without a PLT stub: about 3 % of a Kimi-class bind, whose
        # loops call PyTuple_GetItem and friends per item (docs/performance.md, session 54).
        cflags += ["-fvisibility=hidden"]
        if sys.platform.startswith("linux"):
            cflags += ["-fno-plt"]
            # Loop heads on 32-byte boundaries (GCC's generic tuning: 16 at most): a change
            # anywhere in the files linked before one moved its hot loops across a boundary,
            # and pack_targets read 66 or 73 ms for the same code. With it a Kimi-class plan
            # stage measured 0.957, assemble and bind within the noise (docs/performance.md,
            # session 59).
            cflags += ["-falign-loops=32"]
    return cflags, ldflags


include_dirs, library_dirs = _libcrypto_flags()
extra_compile_args, extra_link_args = _compile_args()

native = Extension(
    "mooncake.reshard._native",
    sources=sorted(glob.glob(os.path.join("csrc", "*.c"))),
    depends=sorted(glob.glob(os.path.join("csrc", "*.h"))),
    include_dirs=["csrc", *include_dirs],
    library_dirs=library_dirs,
    libraries=["crypto"],
    define_macros=[("Py_LIMITED_API", "0x030A0000")],
    py_limited_api=True,
    extra_compile_args=extra_compile_args,
    extra_link_args=extra_link_args,
)

setup(
    package_dir={"mooncake.reshard": "mooncake_reshard"},
    packages=[
        "mooncake.reshard",
        "mooncake.reshard.contracts",
        "mooncake.reshard.weight",
        "mooncake.reshard.weight._planner",
    ],
    package_data={"mooncake.reshard": ["py.typed", "_native.pyi"]},
    ext_modules=[native],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
    zip_safe=False,
)
