// Package targz reads gzip files and the tar archives in them, for tests
// that read large ones (release archives, npm tarballs holding the
// binaries, the Node and Kimi install). It decompresses with the system's
// gzip when there is one: Go's decompressor in a test binary built with
// -race costs about ten times the CPU, and these files are tens to
// hundreds of megabytes.
package targz

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
)

// Open returns a reader of path's decompressed bytes and done, which
// reports a bad stream (a CRC mismatch included) and releases what Open
// took. done reads whatever the caller left unread, so it checks the
// whole stream either way; it is safe to call more than once.
func Open(path string) (r io.Reader, done func() error, err error) {
	if bin, lookErr := exec.LookPath("gzip"); lookErr == nil {
		return system(bin, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return gz, once(func() error {
		defer f.Close()
		if _, err := io.Copy(io.Discard, gz); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}), nil
}

// system runs `gzip -dc path`; its exit status is the stream's verdict.
func system(bin, path string) (io.Reader, func() error, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-dc", path)
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	return out, once(func() error {
		_, cerr := io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("gzip -dc %s: %w: %s", path, err, bytes.TrimSpace(stderr.Bytes()))
		}
		return cerr
	}), nil
}

// once makes fn's first result every call's.
func once(fn func() error) func() error {
	var o sync.Once
	var err error
	return func() error {
		o.Do(func() { err = fn() })
		return err
	}
}

// Walk calls each for the entries of the tar.gz file at path, in order,
// with a reader of the entry's bytes, until each says stop or fails. The
// whole gzip stream is checked either way.
func Walk(path string, each func(h *tar.Header, r io.Reader) (more bool, err error)) error {
	r, done, err := Open(path)
	if err != nil {
		return err
	}
	werr := func() error {
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if more, err := each(h, tr); err != nil || !more {
				return err
			}
		}
	}()
	if err := done(); err != nil && werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("%s: %w", path, werr)
	}
	return nil
}
