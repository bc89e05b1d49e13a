#include "../src/ggml-cpu/amx/amx.cpp"
