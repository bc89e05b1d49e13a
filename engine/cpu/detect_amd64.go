package cpu

import "golang.org/x/sys/cpu"

// Detect reads this CPU's features (CPUID, and the OS's support for the
// wider register files, as golang.org/x/sys/cpu checks it).
func Detect() Features {
	x := cpu.X86
	return Features{
		"sse3": x.HasSSE3, "ssse3": x.HasSSSE3, "sse4.1": x.HasSSE41, "sse4.2": x.HasSSE42,
		"popcnt": x.HasPOPCNT, "cx16": x.HasCX16,
		"avx": x.HasAVX, "avx2": x.HasAVX2, "bmi1": x.HasBMI1, "bmi2": x.HasBMI2, "f16c": x.HasF16C,
		"fma": x.HasFMA, "lzcnt": x.HasLZCNT, "movbe": x.HasMOVBE, "osxsave": x.HasOSXSAVE,
		"avx512f": x.HasAVX512F, "avx512cd": x.HasAVX512CD, "avx512bw": x.HasAVX512BW,
		"avx512dq": x.HasAVX512DQ, "avx512vl": x.HasAVX512VL, "avx512vnni": x.HasAVX512VNNI,
		"avx512vbmi": x.HasAVX512VBMI, "avx512bf16": x.HasAVX512BF16,
		"amx-tile": x.HasAMXTile, "amx-int8": x.HasAMXInt8, "amx-bf16": x.HasAMXBF16,
	}
}
