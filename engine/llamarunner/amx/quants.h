#include "../src/ggml-cpu/quants.h"
