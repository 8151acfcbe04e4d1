#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo gear_method();
}
