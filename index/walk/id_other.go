//go:build !unix

package walk

import (
	"io/fs"
	"path/filepath"
)

// fileID names a file or folder by its resolved path where the platform
// gives no device and inode through os.Stat.
type fileID struct{ path string }

func idOf(path string, _ fs.FileInfo) (fileID, error) {
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fileID{}, err
	}
	p, err = filepath.Abs(p)
	return fileID{path: p}, err
}
