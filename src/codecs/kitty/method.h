#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo kitty_method();
}
