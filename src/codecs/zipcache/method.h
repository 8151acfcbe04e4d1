#pragma once
#include "veloxquant/method.h"
namespace veloxquant {
MethodInfo zipcache_method();
}
