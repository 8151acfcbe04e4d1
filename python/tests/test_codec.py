"""veloxquant.Codec: every registered quantizer through numpy, byte counts, errors."""

import numpy as np
import pytest

import veloxquant as vq

# Calibrated methods (kvquant_nuq) need an artifact from `veloxquant calibrate`: the C++ suite
# covers them (tests/calibration, tests/codecs/kvquant_test.cpp).
QUANTIZERS = [m.name for m in vq.methods() if m.kind == "quantizer" and not m.calibrated]
DIM = 128


def rows(n, seed=0, dim=DIM):
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def ready_codec(spec, x, stream="key"):
    codec = vq.Codec(spec, dim=DIM, stream=stream)
    codec.fit(x)  # a no-op for codecs that are not fitted to their data
    return codec


def tokens_for(codec, at_least=64):
    return -(-at_least // codec.block_tokens) * codec.block_tokens


@pytest.mark.parametrize("spec", QUANTIZERS)
@pytest.mark.parametrize("stream", ["key", "value"])
def test_round_trip_bytes_and_scores(spec, stream):
    probe = vq.Codec(spec, dim=DIM, stream=stream)
    n = tokens_for(probe)
    x = rows(n)
    codec = ready_codec(spec, x, stream)
    codes = codec.encode(x)
    assert codes.dtype == np.uint8 and codes.ndim == 1
    if codec.variable_length:
        assert len(codes) <= codec.nbytes(n)
    else:
        assert len(codes) == codec.nbytes(n)
    y = codec.decode(codes, n)
    assert y.shape == (n, DIM) and y.dtype == np.float32
    # Rows read with the wrong layout would decode to noise, an error of about sqrt(2) |x|; every
    # method, 1-bit qjl (about 0.8 |x|) included, stays below |x|.
    assert np.linalg.norm(y - x) < 0.9 * np.linalg.norm(x)
    q = rows(3, seed=1)
    scores = codec.score(q, codes, n)
    assert scores.shape == (3, n)
    # Scores from codes approximate the scores of the reconstruction (exactly, up to rounding,
    # for codecs that score by decoding; unbiased estimators such as qjl are noisier).
    exact = q @ y.T
    assert np.linalg.norm(scores - exact) <= 0.5 * np.linalg.norm(exact) + 1e-3


@pytest.mark.parametrize("spec", QUANTIZERS)
def test_encoding_is_deterministic(spec):
    x = rows(tokens_for(vq.Codec(spec, dim=DIM)))
    first = ready_codec(spec, x).encode(x)
    again = ready_codec(spec, x).encode(x)
    assert np.array_equal(first, again)


def test_fp16_codec_is_exact_at_half_precision():
    x = rows(8)
    codec = vq.Codec("fp16", dim=DIM)
    codes = codec.encode(x)
    assert len(codes) == 8 * DIM * 2 == codec.nbytes(8)
    assert np.array_equal(codec.decode(codes, 8), x.astype(np.float16).astype(np.float32))


def test_seed_changes_random_rotations():
    x = rows(16)
    a = vq.Codec("turboquant_mse", dim=DIM, seed=1).encode(x)
    b = vq.Codec("turboquant_mse", dim=DIM, seed=2).encode(x)
    assert not np.array_equal(a, b)


def test_non_contiguous_input_is_copied_and_read_correctly():
    x = rows(32)
    codec = vq.Codec("fp16", dim=DIM)
    reversed_rows = x[::-1]
    assert not reversed_rows.flags.c_contiguous
    assert np.array_equal(codec.encode(reversed_rows), codec.encode(np.ascontiguousarray(reversed_rows)))


def test_properties():
    codec = vq.Codec("kivi:kbits=4", dim=64, stream="value")
    assert codec.spec.startswith("kivi:kbits=4,") and codec.stream == "value" and codec.dim == 64
    assert codec.block_tokens >= 1 and codec.state_bytes >= 0
    assert isinstance(codec.fused_score, bool)


def test_wrong_shapes_and_dtypes_raise_shape_error():
    codec = vq.Codec("kivi", dim=DIM)
    with pytest.raises(vq.ShapeError, match=r"x has shape \[32, 64\] f32; expected \[n, 128\]"):
        codec.encode(rows(32, dim=64))
    with pytest.raises(vq.ShapeError, match=r"x is \[32, 128\] float64; expected 2 dimensions of float32"):
        codec.encode(rows(32).astype(np.float64))
    with pytest.raises(vq.ShapeError, match="expected 2 dimensions"):
        codec.encode(rows(32)[None])
    with pytest.raises(vq.ShapeError, match=r"holds 31 tokens; expected a multiple of 32"):
        codec.encode(rows(31))


def test_non_finite_and_out_of_range_values_raise():
    codec = vq.Codec("kivi", dim=DIM)
    x = rows(32)
    x[3, 7] = np.nan
    with pytest.raises(vq.ShapeError, match=r"x\[3, 7\] is nan; expected a finite number"):
        codec.encode(x)
    x[3, 7] = 70000.0
    with pytest.raises(vq.ShapeError, match=r"x\[3, 7\] is 70000; expected \|x\| <= 65504"):
        codec.encode(x)


def test_damaged_codes_raise_instead_of_reading_out_of_bounds():
    codec = vq.Codec("kivi", dim=DIM)
    codes = codec.encode(rows(64))
    with pytest.raises(vq.Error, match=rf"need {len(codes)} bytes; {len(codes) - 1} are there"):
        codec.decode(codes[:-1], 64)
    longer = np.concatenate([codes, codes[:1]])
    with pytest.raises(vq.ShapeError, match=rf"codes hold {len(longer)} bytes; expected {len(codes)}"):
        codec.decode(longer, 64)
    with pytest.raises(vq.ShapeError, match="uint8"):
        codec.decode(codes.astype(np.int16), 64)
    with pytest.raises(vq.Error, match="the codes of 96 tokens need"):
        codec.score(rows(1), codes, 96)


def test_bad_construction_arguments():
    with pytest.raises(vq.SpecError, match="snapkv is an eviction policy"):
        vq.Codec("snapkv:budget=64+kivi")
    with pytest.raises(vq.SpecError, match="stream='keys'; expected 'key' or 'value'"):
        vq.Codec("kivi", stream="keys")
    with pytest.raises(vq.SpecError, match="kbits"):
        vq.Codec("kivi:kbits=3")


def test_calibrated_codecs_say_how_to_calibrate():
    calibrated = [m.name for m in vq.methods() if m.calibrated]
    assert calibrated, "kvquant_nuq is calibrated"
    for spec in calibrated:
        with pytest.raises(vq.Error, match="needs calibration"):
            vq.Codec(spec, dim=DIM)


def test_fitted_codecs_need_fit_first():
    fitted = [m for m in QUANTIZERS if m in ("svdq", "palu")]
    assert fitted, "svdq and palu fit a basis per stream"
    for spec in fitted:
        codec = vq.Codec(spec, dim=DIM)
        with pytest.raises(vq.Error, match=r"call fit\(x\) before encode\(\)"):
            codec.encode(rows(tokens_for(codec)))
        with pytest.raises(vq.ShapeError, match="got 0 tokens; expected at least 1"):
            codec.fit(rows(0))
