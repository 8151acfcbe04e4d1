# Sourced by the GPU machine's scripts: unpacks a program bench/cuda/carry_parity.sh carried
# (.cuda-carry/NAME.xz) into build-h200/ and sets LD_LIBRARY_PATH so that it finds the libraries
# that travelled with it and the machine's cuBLAS (the CUDA toolkit's, or the pip wheel's).
#   source bench/cuda/carried.sh; carried NAME   -> prints the program's path, or fails
cublas_dir() {
  local lib
  lib=$(find /usr/local/cuda*/ /usr/lib/x86_64-linux-gnu / -maxdepth 6 -name 'libcublas.so.13*' 2>/dev/null | head -1 || true)
  [ -n "$lib" ] && dirname "$lib"
}
carried() {
  local name=$1
  [ -f ".cuda-carry/$name.xz" ] || { echo "no .cuda-carry/$name.xz (bench/cuda/carry_parity.sh builds it)" >&2; return 1; }
  mkdir -p build-h200
  xz -dc ".cuda-carry/$name.xz" > "build-h200/$name"
  chmod +x "build-h200/$name"
  echo "build-h200/$name"
}
export LD_LIBRARY_PATH="$PWD/.cuda-carry:$(cublas_dir):${LD_LIBRARY_PATH:-}"
