#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo cachegen_method();
}
