#include "../src/ggml-impl.h"
