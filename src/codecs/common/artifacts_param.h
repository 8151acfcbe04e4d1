// The artifacts=DIR parameter: where a calibrated method's artifact (`veloxquant calibrate -o
// DIR`) and precomputed tables (`veloxquant precompute -o DIR`) are read from
// (with_calibration, veloxquant/calibration.h).
#pragma once

#include "veloxquant/spec.h"

namespace veloxquant {

inline ParamDef artifacts_param(bool calibrated) {
  return ParamDef::text("artifacts", calibrated
                                         ? "directory holding the calibration (veloxquant calibrate -o DIR) "
                                           "and any precomputed tables"
                                         : "directory holding precomputed tables (veloxquant precompute -o "
                                           "DIR); without it the tables are computed");
}

}  // namespace veloxquant
