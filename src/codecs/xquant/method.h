#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo xquant_method();
}
