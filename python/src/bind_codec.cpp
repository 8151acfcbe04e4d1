// veloxquant.Codec: how one stream of vectors (the keys or the values of one KV head) is stored
// by a method, on numpy arrays: encode, decode, exact byte counts, scores straight from codes.
#include <fmt/format.h>
#include <nanobind/stl/string.h>

#include <cmath>
#include <memory>
#include <span>
#include <string>

#include "arrays.h"
#include "bindings.h"
#include "veloxquant/calibration.h"
#include "veloxquant/codec.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace nb = nanobind;

namespace veloxquant::python {
namespace {

class StreamCodec {
 public:
  StreamCodec(const std::string& spec_text, size_t dim, const std::string& stream, uint64_t seed) {
    const Spec spec = parse_spec(spec_text);
    if (spec.eviction) {
      throw SpecError(fmt::format("Codec('{}'): {} is an eviction policy, which chooses tokens "
                                  "and encodes none; expected a quantizer spec such as 'kivi'",
                                  spec_text, spec.eviction->name));
    }
    if (stream != "key" && stream != "value") {
      throw SpecError(fmt::format("stream='{}'; expected 'key' or 'value'", stream));
    }
    if (dim == 0) throw ShapeError("dim=0; expected the vector length, at least 1");
    // A calibrated method reads its tables from the spec's artifacts= directory.
    LayerCodecs codecs = spec.method->make(spec.params, with_calibration(spec, LayerShape{1, dim, 0, seed, 1}));
    prototype_ = std::move(stream == "key" ? codecs.key : codecs.value);
    codec_ = prototype_;
    spec_ = spec.to_string();
    stream_ = stream;
    // Codecs fitted per stream are not ready until fit() has seen data; calibrated ones got their
    // tables from the artifact above.
    ready_ = !prototype_->fits_streams();
  }

  void fit(const InArray& x) {
    const std::span<const float> rows = checked_rows(x, "x");
    const size_t n = rows.size() / dim();
    if (prototype_->fits_streams()) codec_ = codec_for_stream(*prototype_, rows.data(), n);
    ready_ = true;
  }

  ByteArray encode(const InArray& x) const {
    const std::span<const float> rows = checked_rows(x, "x");
    const size_t n = rows.size() / dim();
    check_ready("encode");
    check_blocks(n, "x");
    std::vector<uint8_t> codes(codec_->code_bytes(n));
    codec_->encode(rows.data(), n, codes.data());
    // A variable-length codec writes fewer bytes than its bound: return those it wrote.
    codes.resize(codec_->encoded_bytes(codes.data(), n, codes.size()));
    return byte_array(std::move(codes));
  }

  FloatArray decode(const InArray& codes, size_t n) const {
    const std::span<const uint8_t> bytes = checked_codes(codes, n, "decode");
    std::vector<float> x(n * dim());
    codec_->decode(bytes.data(), n, x.data());
    return float_array(std::move(x), {n, dim()});
  }

  FloatArray score(const InArray& q, const InArray& codes, size_t n) const {
    const std::span<const float> queries = checked_rows(q, "q");
    const size_t nq = queries.size() / dim();
    const std::span<const uint8_t> bytes = checked_codes(codes, n, "score");
    std::vector<float> scores(nq * n);
    codec_->score(queries.data(), nq, bytes.data(), n, scores.data());
    return float_array(std::move(scores), {nq, n});
  }

  size_t nbytes(size_t n) const {
    check_blocks(n, "n");
    return codec_->code_bytes(n);
  }

  size_t dim() const { return codec_->dim(); }
  const Codec& codec() const { return *codec_; }
  const std::string& spec() const { return spec_; }
  const std::string& stream() const { return stream_; }

 private:
  // x's rows of dim() float32 values, read in place: checked finite and within the fp16 range
  // (what Codec::encode requires) without a copy.
  std::span<const float> checked_rows(const InArray& x, const char* what) const {
    const TensorView view = view_of(x, what, 2, /*allow_f16=*/false);
    if (view.dim(1) != dim()) {
      throw ShapeError(fmt::format("{} has shape {}; expected [n, {}] (the codec's dim)", what,
                                   view.shape_string(), dim()));
    }
    const std::span<const float> rows(static_cast<const float*>(view.data), view.numel());
    for (size_t i = 0; i < rows.size(); ++i) {
      if (std::fabs(rows[i]) <= 65504.0f) continue;  // false for NaN too
      throw ShapeError(fmt::format("{}[{}, {}] is {}; expected {}", what, i / dim(), i % dim(), rows[i],
                                   std::isfinite(rows[i]) ? "|x| <= 65504 (the fp16 range)"
                                                          : "a finite number"));
    }
    return rows;
  }

  void check_blocks(size_t n, const char* what) const {
    if (n % codec_->block_tokens() == 0) return;
    throw ShapeError(fmt::format("{} holds {} tokens; expected a multiple of {} ({} encodes blocks "
                                 "of that many tokens)", what, n, codec_->block_tokens(), spec_));
  }

  void check_ready(const char* what) const {
    if (ready_) return;
    throw Error(fmt::format("{} fits its parameters to the data; call fit(x) before {}()", spec_, what));
  }

  // The codes of n tokens, checked as codes from a file are (Codec::check_codes), so that
  // damaged codes raise instead of being read out of bounds.
  std::span<const uint8_t> checked_codes(const InArray& codes, size_t n, const char* what) const {
    const std::span<const uint8_t> bytes = bytes_of(codes, "codes");
    check_ready(what);
    check_blocks(n, "n");
    const size_t need = codec_->encoded_bytes(bytes.data(), n, bytes.size());
    if (need != bytes.size()) {
      throw ShapeError(fmt::format("codes hold {} bytes; expected {} for {} tokens of {}",
                                   bytes.size(), need, n, spec_));
    }
    codec_->check_codes(bytes.data(), n);
    return bytes;
  }

  std::shared_ptr<Codec> prototype_;   // as the method made it; fit() calibrates it
  std::shared_ptr<const Codec> codec_;  // what encodes: the prototype, or one fitted to a stream
  std::string spec_, stream_;
  bool ready_ = false;
};

}  // namespace

void bind_codec(nb::module_& m) {
  nb::class_<StreamCodec>(m, "Codec",
                          "The codec a method stores one stream of vectors with: the keys "
                          "(stream='key') or the values of one KV head, [n, dim] float32 rows.\n"
                          "Codecs fitted to their data (svdq, palu) need fit(x) first. A cache's "
                          "fp16 residual window is the cache's, not the codec's: see Cache.")
      .def(nb::init<const std::string&, size_t, const std::string&, uint64_t>(), nb::arg("spec"),
           nb::arg("dim") = 128, nb::arg("stream") = "key", nb::arg("seed") = 0,
           "Raises SpecError naming the parameter when the spec is invalid.")
      .def("fit", &StreamCodec::fit, nb::arg("x"),
           "Fits a codec fitted per stream (svdq, palu, rabitq) to x ([n, dim] float32) as a stream's "
           "first tokens; other codecs ignore it (calibrated ones load artifacts= from the spec).")
      .def("encode", &StreamCodec::encode, nb::arg("x"),
           "The codes of x ([n, dim] float32, n a multiple of block_tokens, finite, |x| <= 65504) "
           "as uint8 bytes.")
      .def("decode", &StreamCodec::decode, nb::arg("codes"), nb::arg("n"),
           "The [n, dim] float32 reconstruction of the codes of n tokens.")
      .def("score", &StreamCodec::score, nb::arg("q"), nb::arg("codes"), nb::arg("n"),
           "Inner products [nq, n] of the queries q ([nq, dim] float32) with the n encoded tokens, "
           "computed from the codes where the codec allows (fused_score). A codec that lets each "
           "query read only some tokens (rabitq with nprobe) gives the others the lowest float, "
           "-3.4028235e38, which attention weighs 0.")
      .def("nbytes", &StreamCodec::nbytes, nb::arg("n"),
           "Bytes of the codes of n tokens: exact for fixed-length codecs, the most encode can "
           "write for variable-length ones (cachegen).")
      .def_prop_ro("spec", &StreamCodec::spec, "the canonical spec")
      .def_prop_ro("stream", &StreamCodec::stream, "'key' or 'value'")
      .def_prop_ro("dim", &StreamCodec::dim)
      .def_prop_ro(
          "block_tokens", [](const StreamCodec& c) { return c.codec().block_tokens(); },
          "tokens encoded together; encode and decode take a multiple of it")
      .def_prop_ro(
          "state_bytes", [](const StreamCodec& c) { return c.codec().state_bytes(); },
          "bytes of the fitted state every block of a stream shares")
      .def_prop_ro("variable_length", [](const StreamCodec& c) { return c.codec().variable_length(); })
      .def_prop_ro(
          "fused_score", [](const StreamCodec& c) { return c.codec().fused_score(); },
          "whether score() reads the codes without decoding them");
}

}  // namespace veloxquant::python
