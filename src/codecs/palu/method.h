#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo palu_method();
}
