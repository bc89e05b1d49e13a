#include "../src/ggml-backend-impl.h"
