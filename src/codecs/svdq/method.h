#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo svdq_method();
}
