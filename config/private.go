// PrivateFile refuses a secret-holding file (a TLS key, agent.env_file, a signing key) that its group or others may read or write, as ssh refuses such.

package config

import (
	"fmt"
	"os"
)

// PrivateFile refuses a secret-holding file (a TLS key, agent.env_file,
// a signing key) that its group or others may read or write, as ssh
// refuses such a key: on a shared host another account would read it.
// key names the setting in the error. A file that does not exist is
// left to its reader to report.
func PrivateFile(key, path string) error {
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if m := fi.Mode().Perm(); m&0o077 != 0 {
		return &Error{Msg: fmt.Sprintf("%s: %s is mode %04o, readable beyond its owner; run chmod 600 %s", key, path, m, path)}
	}
	return nil
}
