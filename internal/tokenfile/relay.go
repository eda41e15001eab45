package tokenfile

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
)

// HomeName is the relay token `aep-kimi up` keeps under $AEP_HOME (0600).
const HomeName = "token"

// AEPHome is $AEP_HOME, else ~/.aep.
func AEPHome(getenv func(string) string) string {
	if h := getenv("AEP_HOME"); h != "" {
		return h
	}
	return filepath.Join(UserHome(), ".aep")
}

// UserHome is the user's home directory, or "" when unknown.
func UserHome() string {
	h, _ := os.UserHomeDir()
	return h
}

// Client reads the relay token for a client of the relay: file (which
// must not be readable by others), else AEP_TOKEN, else the file `aep-kimi
// up` keeps ($AEP_HOME/token) when it exists. Empty means no token:
// watch-only.
func Client(getenv func(string) string, file string) (string, error) {
	return ClientIn(getenv, file, AEPHome(getenv))
}

// ClientIn is Client with the AEP home given (a command's --home).
func ClientIn(getenv func(string) string, file, home string) (string, error) {
	if file == "" {
		if t := httpguard.TrimToken(getenv("AEP_TOKEN")); t != "" {
			return t, nil
		}
		return ReadHome(filepath.Join(home, HomeName))
	}
	return Read(file, true)
}

// Server is the relay's own token: AEP_TOKEN, else file (--token-file or
// AEP_TOKEN_FILE). Empty means watch-only.
func Server(getenv func(string) string, file string) (string, error) {
	if t := httpguard.TrimToken(getenv("AEP_TOKEN")); t != "" {
		return t, nil
	}
	if file == "" {
		return "", nil
	}
	return Read(file, true)
}

// Shared is the one token `up` shares among its components: AEP_TOKEN, or
// AEP_TOKEN_FILE, or $AEP_HOME/token in home, created (0600) on first run;
// file is where it was read from ("" for AEP_TOKEN).
func Shared(getenv func(string) string, home string) (token, file string, err error) {
	if t := httpguard.TrimToken(getenv("AEP_TOKEN")); t != "" {
		return t, "", nil
	}
	file = getenv("AEP_TOKEN_FILE")
	if file == "" {
		file = filepath.Join(home, HomeName)
		if _, statErr := os.Lstat(file); errors.Is(statErr, os.ErrNotExist) {
			if err := Create(file); err != nil {
				return "", "", err
			}
		}
		token, err = ReadHome(file)
		return token, file, err
	}
	token, err = Client(getenv, file)
	return token, file, err
}

// ErrTokenAndFile is --token given with --token-file.
var ErrTokenAndFile = errors.New("--token and --token-file exclude each other")

// CommandLine is the relay token of a command that takes both --token-file
// and --token: the file (which must not be readable by others), else
// --token (onCommandLine true: the caller warns, a command line is readable
// by every local user), else AEP_TOKEN, AEP_TOKEN_FILE or $AEP_HOME/token.
func CommandLine(getenv func(string) string, file, token string) (tok string, onCommandLine bool, err error) {
	tok = httpguard.TrimToken(token)
	switch {
	case file != "" && tok != "":
		return "", false, ErrTokenAndFile
	case file != "":
		tok, err = Read(file, true)
		return tok, false, err
	case tok != "":
		return tok, true, nil
	}
	tok, err = Client(getenv, getenv("AEP_TOKEN_FILE"))
	return tok, false, err
}
