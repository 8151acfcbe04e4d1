#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo minicache_method();
}
