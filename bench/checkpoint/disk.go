// The disk's sequential write speed, for the checkpoint bench's figures.

package main

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The disk's own speeds, measured in the same run as what they bound.

// diskWrite is dir's disk's sequential write speed in MiB/s over bytes:
// what a restore could reach at best on it.
func diskWrite(dir string, bytes int64) (float64, error) {
	f, err := os.CreateTemp(dir, "disk-*")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	buf := block()
	start := time.Now()
	for n := int64(0); n < bytes; n += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			_ = f.Close()
			return 0, err
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return 0, err
	}
	elapsed := time.Since(start)
	if err := f.Close(); err != nil {
		return 0, err
	}
	return mib(bytes) / elapsed.Seconds(), nil
}

// diskCopy is dir's disk's speed in MiB/s at copying a file of bytes
// onto itself, the source read from the disk (not the page cache): what
// a restore from a store on the same disk (as here) could reach at best,
// since the disk then reads every chunk as it writes it.
func diskCopy(dir string, bytes int64) (float64, error) {
	src, err := os.CreateTemp(dir, "disk-src-*")
	if err != nil {
		return 0, err
	}
	defer func() { _ = src.Close(); _ = os.Remove(src.Name()) }()
	buf := block()
	for n := int64(0); n < bytes; n += int64(len(buf)) {
		if _, err := src.Write(buf); err != nil {
			return 0, err
		}
	}
	if err := src.Sync(); err != nil {
		return 0, err
	}
	if err := unix.Fadvise(int(src.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return 0, err
	}
	dst, err := os.CreateTemp(dir, "disk-dst-*")
	if err != nil {
		return 0, err
	}
	defer func() { _ = dst.Close(); _ = os.Remove(dst.Name()) }()
	start := time.Now()
	for off := int64(0); off < bytes; off += int64(len(buf)) {
		if _, err := src.ReadAt(buf, off); err != nil {
			return 0, err
		}
		if _, err := dst.Write(buf); err != nil {
			return 0, err
		}
	}
	if err := dst.Sync(); err != nil {
		return 0, err
	}
	return mib(bytes) / time.Since(start).Seconds(), nil
}

// block is 4 MiB of a pattern no file system compresses or skips.
func block() []byte {
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i*7 + i>>9)
	}
	return buf
}
