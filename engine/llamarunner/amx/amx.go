//go:build amd64

// Package amx compiles ggml's AMX kernels (ggml-cpu/amx in the ollama
// module, which has no Go file of its own and so is never built there).
// ggml-cpu.cpp references ggml_backend_amx_buffer_type() whenever the
// compiler targets AMX-INT8 with AVX-512 VNNI; without this package such a
// build fails to link. Built for any other target the sources compile to
// nothing.
//
// The .cpp files include the module's sources through the ggml include
// folder already on CGO_CPPFLAGS (../src from there), and the headers here
// forward the names those sources include to the same place, so no new
// include flag (which would rebuild all of llama.cpp) is needed.
package amx

// #cgo CPPFLAGS: -DNDEBUG
// #cgo linux CPPFLAGS: -D_GNU_SOURCE
// #cgo CXXFLAGS: -std=c++17
import "C"
