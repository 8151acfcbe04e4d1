#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo fp16_method();
}
