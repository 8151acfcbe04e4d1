#!/usr/bin/env bash
# The Python package with the CUDA backend on a GPU machine that has torch and transformers but
# not all of the library's build dependencies: builds it with `VELOXQUANT_CUDA=ON pip install .`,
# runs the tests that need torch, transformers or a GPU (python/tests/test_hf.py,
# test_device_cache.py) and the Hugging Face example, and writes their output to OUT.
#   bench/python/hf_gpu.sh OUT
# Carry: .hf-carry/ (bench/python/carry_hf.sh fills it here): Highway's Debian packages and
# scikit-build-core's wheel, the two things the GPU image lacks.
set -euo pipefail
out=${1:?usage: bench/python/hf_gpu.sh OUT}
cd "$(dirname "$0")/../.."
deps=/tmp/veloxquant-deps
mkdir -p "$deps" "$out"
for deb in .hf-carry/*.deb; do dpkg -x "$deb" "$deps"; done
pc="$deps/usr/lib/x86_64-linux-gnu/pkgconfig"
sed -i "s#^prefix=.*#prefix=$deps/usr#" "$pc"/libhwy*.pc
if ! pkg-config --exists openblas; then
  # The image ships OpenBLAS without its pkg-config file.
  printf 'libdir=/usr/lib/x86_64-linux-gnu\nincludedir=/usr/include/x86_64-linux-gnu\nName: openblas\nDescription: OpenBLAS\nVersion: 0.3\nLibs: -L${libdir} -lopenblas\nCflags: -I${includedir}\n' >"$pc/openblas.pc"
fi
export PKG_CONFIG_PATH="$pc" CMAKE_PREFIX_PATH="$deps/usr" LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/veloxquant-build .hf-carry/scikit_build_core-*.whl
export PYTHONPATH=/tmp/veloxquant-build
# The system compiler: the image's default CXX (/opt/gcc) links libstdc++ into the module
# statically and exports its operator delete, which breaks torch when it is imported second.
export CC=/usr/bin/gcc CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
rm -rf build-python/cp312-*
start=$(date +%s)
if ! VELOXQUANT_CUDA=ON CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install -v --no-index --no-deps \
    --no-build-isolation --upgrade --target /tmp/veloxquant-package . >"$out/install.log" 2>&1; then
  grep -v "^  *\[" "$out/install.log" | tail -40
  exit 1
fi
echo "pip install took $(( $(date +%s) - start )) s" | tee -a "$out/install.log"
export PYTHONPATH=/tmp/veloxquant-package
# veloxquant imported before torch (the order that failed with a statically linked libstdc++).
python3 -c "import veloxquant, torch, transformers; print('veloxquant', veloxquant.__file__, 'cuda_available', veloxquant.cuda_available, 'torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())" | tee "$out/versions.txt"
set +e
(cd python/tests && python3 -m pytest -q -p no:cacheprovider test_hf.py test_device_cache.py 2>&1) | tee "$out/pytest.log"
tests=${PIPESTATUS[0]}
PYTHONUNBUFFERED=1 python3 python/examples/hf_generate.py 2>&1 | tee "$out/hf_example.txt"
example=${PIPESTATUS[0]}
exit $(( tests || example ))
