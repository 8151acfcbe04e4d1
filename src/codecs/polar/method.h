// The `polar` method: PolarQuant for keys and values.
#pragma once

#include "veloxquant/method.h"

namespace veloxquant {
MethodInfo polar_method();
}
