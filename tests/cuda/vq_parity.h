// Parity of the vector-quantization kernels (veloxquant/cuda_vq.h) with the CPU codecs.
#pragma once

#include <random>

// Prints a table of cases; true when every case passes.
bool run_vq_parity(std::mt19937& gen);
