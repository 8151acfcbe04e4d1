// The model identity section (MODL) that session files and calibration artifacts share: the
// architecture, the shape, the weights and tokenizer hashes.
#pragma once

#include "file_io/sections.h"
#include "veloxquant/model_identity.h"

namespace veloxquant::file_io {

// The payload: architecture, shape, weights hash, tokenizer hash.
void put_model(SectionBuilder& s, const ModelIdentity& m);
// Throws FormatError naming the field when the payload is short, long or has a zero shape.
ModelIdentity read_model(PayloadReader r);

}  // namespace veloxquant::file_io
