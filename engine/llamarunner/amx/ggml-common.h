#include "../src/ggml-common.h"
