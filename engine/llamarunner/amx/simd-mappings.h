#include "../src/ggml-cpu/simd-mappings.h"
