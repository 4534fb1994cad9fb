//go:build !unix

package weights

func mapFile(path string) ([]byte, func() error, error) { return readWhole(path) }
