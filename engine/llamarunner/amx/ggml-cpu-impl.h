#include "../src/ggml-cpu/ggml-cpu-impl.h"
