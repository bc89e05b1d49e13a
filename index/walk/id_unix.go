//go:build unix

package walk

import (
	"fmt"
	"io/fs"
	"syscall"
)

// fileID names a file or folder independently of the path that reached it.
type fileID struct{ dev, ino uint64 }

func idOf(path string, fi fs.FileInfo) (fileID, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, fmt.Errorf("no device and inode for %s", path)
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
}
