#include "../src/ggml-cpu/traits.h"
