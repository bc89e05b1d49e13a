#include "../src/ggml-cpu/amx/mmq.cpp"
