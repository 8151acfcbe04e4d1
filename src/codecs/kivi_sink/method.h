#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo kivi_sink_method();
}
