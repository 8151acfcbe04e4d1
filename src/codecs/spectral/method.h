// SpectralQuant: keys rotated into their calibrated eigenbasis, bits allocated across the
// eigen-directions by reverse water-filling. See docs/methods/spectral.md.
#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo spectral_method();
}
