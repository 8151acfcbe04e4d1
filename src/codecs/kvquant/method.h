#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo kvquant_nuq_method();
}
