#include "runtime/weights/weight_matrix.h"

#include <fmt/format.h>

#include "runtime/gguf/ggml_types.h"
#include "runtime/weights/row_kernels.h"

namespace veloxquant::runtime {

bool weight_type_supported(GgmlType type) { return ggml_type_decodable(type); }

size_t WeightMatrix::row_bytes() const {
  return cols / ggml_block_elements(type) * ggml_block_bytes(type);
}

namespace {

void check_type(const std::string& name, GgmlType type) {
  if (!weight_type_supported(type)) {
    throw FormatError(fmt::format("tensor '{}' has type {}; weight matrices must be one of {}", name,
                                  ggml_type_name(type), gguf::decodable_type_names()));
  }
}

}  // namespace

WeightMatrix WeightMatrix::view(std::string name, GgmlType type, size_t rows, size_t cols,
                                std::span<const uint8_t> data) {
  check_type(name, type);
  // tensor_bytes checks the dims for 0, overflow and a partial block, naming the tensor.
  const uint64_t dims[2] = {cols, rows};
  const uint64_t bytes = gguf::tensor_bytes(name, type, dims);
  if (data.size() != bytes) {
    throw FormatError(fmt::format("tensor '{}': {} bytes of data; expected {} for {} rows of {} {} "
                                  "elements", name, data.size(), bytes, rows, cols,
                                  ggml_type_name(type)));
  }
  return WeightMatrix{std::move(name), type, rows, cols, data};
}

WeightMatrix WeightMatrix::from_gguf(const GgufFile& file, const GgufTensorInfo& info) {
  if (info.dims.size() != 1 && info.dims.size() != 2) {
    throw FormatError(fmt::format("tensor '{}' has {} dims [{}]; expected a matrix (2 dims) or a "
                                  "vector (1 dim)", info.name, info.dims.size(),
                                  fmt::join(info.dims, ", ")));
  }
  check_type(info.name, info.type);
  const uint64_t bytes = gguf::tensor_bytes(info.name, info.type, info.dims);
  // The info may not come from this file's parser: check its claims before trusting them.
  if (info.bytes != bytes || info.file_offset > file.file_size() ||
      bytes > file.file_size() - info.file_offset) {
    throw FormatError(fmt::format("tensor '{}': {} bytes at offset {} ({} needed for its dims "
                                  "[{}]); expected them inside the {}-byte file", info.name,
                                  info.bytes, info.file_offset, bytes, fmt::join(info.dims, ", "),
                                  file.file_size()));
  }
  const size_t cols = info.dims[0], rows = info.dims.size() == 2 ? info.dims[1] : 1;
  return view(info.name, info.type, rows, cols, file.tensor_data(info));
}

WeightMatrix WeightMatrix::row_view(size_t first, size_t n) const {
  if (n == 0 || first > rows || n > rows - first) {
    throw ShapeError(fmt::format("tensor '{}': rows {}..{} requested; expected a part of its {} rows", name, first,
                                 first + n, rows));
  }
  const size_t rb = row_bytes();
  return WeightMatrix{fmt::format("{} rows {}..{}", name, first, first + n), type, n, cols,
                      data.subspan(first * rb, n * rb)};
}

void dequantize_row(const WeightMatrix& w, size_t r, float* out) {
  if (r >= w.rows) {
    throw ShapeError(fmt::format("tensor '{}': row {} requested; expected a row below {}", w.name, r,
                                 w.rows));
  }
  const size_t rb = w.row_bytes();
  kernels::decode_rows(w.type, w.data.data() + r * rb, rb, 1, w.cols, out);
}

}  // namespace veloxquant::runtime
