//go:build unix

package app

import "syscall"

// openNonBlocking opens a document without waiting: a FIFO put in a
// document's place would otherwise block the open until a writer came. A
// regular file reads as ever.
const openNonBlocking = syscall.O_NONBLOCK
