// The parts of the extension module, one per area of the library's API (module.cpp calls them).
#pragma once

#include <nanobind/nanobind.h>

namespace veloxquant::python {

void bind_methods(nanobind::module_& m);
void bind_codec(nanobind::module_& m);
void bind_cache(nanobind::module_& m);
void bind_model(nanobind::module_& m);
// Built with the CUDA backend only (VELOXQUANT_CUDA); module.cpp sets cuda_available otherwise.
void bind_cuda(nanobind::module_& m);

}  // namespace veloxquant::python
