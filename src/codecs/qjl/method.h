// The `qjl` method: QJL 1-bit sketched keys, KIVI per-token values.
#pragma once

#include "veloxquant/method.h"

namespace veloxquant {
MethodInfo qjl_method();
}
