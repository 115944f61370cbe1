#!/usr/bin/env bash
# Build the libFuzzer targets over the Python-free C kernels (ASan + UBSan + libFuzzer).
# Each target #includes the csrc file it tests, so kernels are called directly; targets whose
# C file also holds Python glue link against libpython (never initialized: the kernels are
# Python-free). Usage: bash fuzz/build.sh   (needs clang with libFuzzer: apt-get install clang)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
cc=${CC_FUZZ:-clang}
out="$here/build"
mkdir -p "$out"
pyinc=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
pylibdir=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')
pyver=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("LDVERSION"))')
flags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Wno-unused-function
       -DPy_LIMITED_API=0x030A0000 -I"$pyinc")
pylink=(-L"$pylibdir" -Wl,-rpath,"$pylibdir" -lpython"$pyver" -ldl -lm)
"$cc" "${flags[@]}" "$here/targets/coverage_kernels_fuzz.c" -o "$out/coverage_kernels_fuzz"
"$cc" "${flags[@]}" "$here/targets/physical_fuzz.c" -o "$out/physical_fuzz" "${pylink[@]}"
"$cc" "${flags[@]}" "$here/targets/overlap_fuzz.c" -o "$out/overlap_fuzz" "${pylink[@]}"
"$cc" "${flags[@]}" "$here/targets/table_fuzz.c" -o "$out/table_fuzz" "${pylink[@]}"
"$cc" "${flags[@]}" "$here/targets/regioncheck_fuzz.c" -o "$out/regioncheck_fuzz" "${pylink[@]}"
echo "built: $(ls "$out" | tr '\n' ' ')"
