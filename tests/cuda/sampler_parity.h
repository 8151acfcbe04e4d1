// Parity of the GPU sampler (veloxquant/cuda_sampler.h) with the host Sampler.
#pragma once

#include <random>

// Prints a table of cases and the refusals; true when every token agrees and every bad call is refused.
bool run_sampler_parity(std::mt19937& gen);
