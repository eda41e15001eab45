package setup

import (
	"errors"
	"path"
	"strings"
)

// shellQuote returns s as one POSIX sh word: unchanged when every byte is
// plainly safe, else single-quoted with each ' written as '\”. Kimi runs the
// command with /bin/sh -c, so this is the whole escaping story.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, notShellSafe) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func notShellSafe(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("@%+=:,./_-", r)
}

var errShellSyntax = errors.New("unterminated quote or trailing backslash")

// shellWords splits a command line the way sh would for plain words: quotes
// (single, double with \ escapes for $ ` " \ and newline), backslash escapes
// and blank separators. Expansions are kept literally and operators are not
// recognised; that is enough to read back a command we rendered or that a
// re-serializing editor copied verbatim.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errShellSyntax
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
					if s[i] == '\n' {
						continue // line continuation
					}
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errShellSyntax
			}
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errShellSyntax
			}
			i++
			if s[i] == '\n' {
				continue // line continuation joins words
			}
			inWord = true
			cur.WriteByte(s[i])
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// commandProgram returns argv[0] of a hook command, "" when it has none or
// does not split.
func commandProgram(command string) string {
	words, err := shellWords(command)
	if err != nil || len(words) == 0 {
		return ""
	}
	return words[0]
}

// isOurCommand reports whether a hook command runs kimi-hook.
func isOurCommand(command string) bool {
	prog := commandProgram(command)
	return prog != "" && path.Base(prog) == HookCmdName
}
