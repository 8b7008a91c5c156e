// Command copyagent is the agent a reviewer must catch: it trains
// nothing, and puts a model its image brought (/prebuilt/model, made
// beforehand by another run) into its output, as if it were its own.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	dst := filepath.Join(os.Getenv("MLRB_OUTPUT_DIR"), "model")
	if err := copyDir("/prebuilt/model", dst); err != nil {
		fmt.Println("copyagent:", err)
		os.Exit(1)
	}
	fmt.Println("copyagent: model in place")
}

func copyDir(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = in.Close() }()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			_ = out.Close()
			return err
		}
		return out.Close()
	})
}
