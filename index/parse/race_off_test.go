//go:build !race

package parse

const raceBuild = false
