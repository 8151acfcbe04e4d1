// The registry of device formats (device_format.h), filled by each family's VQ_DEVICE_FORMAT.
#include <map>
#include <string>

#include "cuda/cache/device_format.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

// A function-local table: registrations run during static initialization, in any order.
std::map<std::string, DeviceFormatFactory>& formats() {
  static std::map<std::string, DeviceFormatFactory> table;
  return table;
}

}  // namespace

bool register_device_format(const char* name, DeviceFormatFactory make) {
  formats()[name] = make;
  return true;
}

std::unique_ptr<DeviceFormat> make_device_format(const CacheConfig& c) {
  const auto it = formats().find(c.format);
  if (it == formats().end()) {
    std::string names;
    for (const auto& [name, make] : formats()) names += (names.empty() ? "" : ", ") + name;
    throw Error("cuda cache: format '" + c.format + "'; expected one of " + names);
  }
  return it->second(c);
}

}  // namespace veloxquant::cuda
