// veloxquant._veloxquant: the library's codecs, caches and model runtime for Python. The package
// veloxquant (python/veloxquant/__init__.py) re-exports what is defined here.
#include <nanobind/nanobind.h>

#include <string>

#include "bindings.h"
#include "veloxquant/error.h"
#include "veloxquant/threads.h"

namespace nb = nanobind;

namespace {

// Python exception types mirroring the library's, created once when the module loads. SpecError
// and ShapeError are also ValueErrors, so callers that expect the built-in type catch them too.
PyObject* error_type = nullptr;
PyObject* spec_error_type = nullptr;
PyObject* shape_error_type = nullptr;

PyObject* new_exception(nb::module_& m, const char* name, nb::handle bases, const char* doc) {
  const std::string qualified = std::string("veloxquant.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (!type) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

}  // namespace

NB_MODULE(_veloxquant, m) {
  m.doc() = "VeloxQuant: KV-cache compression codecs, caches and a GGUF model runtime.";
  error_type = new_exception(m, "Error", PyExc_RuntimeError,
                             "Bad input or misuse reported by the library; the message names the "
                             "value and what was expected.");
  spec_error_type = new_exception(m, "SpecError", nb::make_tuple(nb::handle(error_type),
                                                                 nb::handle(PyExc_ValueError)),
                                  "A spec string or a method parameter is malformed or out of range.");
  shape_error_type = new_exception(m, "ShapeError", nb::make_tuple(nb::handle(error_type),
                                                                   nb::handle(PyExc_ValueError)),
                                   "An array has the wrong shape or dtype, or holds NaN or infinity.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const veloxquant::SpecError& e) {
      PyErr_SetString(spec_error_type, e.what());
    } catch (const veloxquant::ShapeError& e) {
      PyErr_SetString(shape_error_type, e.what());
    } catch (const veloxquant::Error& e) {
      PyErr_SetString(error_type, e.what());
    }
  });

  m.def("set_threads", [](int threads) {
    veloxquant::set_threads(threads);
  }, nb::arg("threads"), "CPU threads for the matrix products and attention (the CLI's --threads).");

  veloxquant::python::bind_methods(m);
  veloxquant::python::bind_codec(m);
  veloxquant::python::bind_cache(m);
  veloxquant::python::bind_model(m);
#ifdef VELOXQUANT_PYTHON_CUDA
  veloxquant::python::bind_cuda(m);
#else
  m.attr("cuda_available") = false;
#endif
}
