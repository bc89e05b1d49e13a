#include "../src/ggml-quants.h"
