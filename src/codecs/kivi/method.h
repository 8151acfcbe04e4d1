#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo kivi_method();
}
