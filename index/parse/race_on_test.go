//go:build race

package parse

// raceBuild: under -race the runtime and ThreadSanitizer reserve address
// space of their own and die at an RLIMIT_AS with their own messages.
const raceBuild = true
