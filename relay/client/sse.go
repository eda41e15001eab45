package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// SSEItem is one thing read from an event stream: a comment line, or a
// dispatched message.
type SSEItem struct {
	// Comment is the text of a comment line (after the colon, one leading
	// space removed); set only for comments.
	Comment   string
	IsComment bool
	// Event, Data and ID are a message's fields. ID is set (HasID) only when
	// this message carried an id: line.
	Event string
	Data  string
	ID    string
	HasID bool
}

// SSEReader reads a text/event-stream (the WHATWG format: id, event, data
// fields, comments, blank-line dispatch). Lines end in \n or \r\n.
type SSEReader struct {
	r       *bufio.Reader
	maxLine int
	msg     SSEItem
	data    strings.Builder
	hasData bool
}

// ErrSSELineTooLong is returned for a line longer than the reader's limit.
var ErrSSELineTooLong = errors.New("sse: line too long")

// NewSSEReader reads from r; lines longer than maxLine bytes are an error
// (maxLine <= 0 means 32 MiB).
func NewSSEReader(r io.Reader, maxLine int) *SSEReader {
	if maxLine <= 0 {
		maxLine = 32 << 20
	}
	return &SSEReader{r: bufio.NewReaderSize(r, 64<<10), maxLine: maxLine}
}

// Next returns the next comment or message. At the end of the stream it
// returns io.EOF (a message without its closing blank line is discarded, as
// the format says).
func (s *SSEReader) Next() (SSEItem, error) {
	for {
		line, err := s.readLine()
		if err != nil {
			return SSEItem{}, err
		}
		if len(line) == 0 {
			if !s.hasData {
				s.msg = SSEItem{}
				continue
			}
			out := s.msg
			out.Data = strings.TrimSuffix(s.data.String(), "\n")
			s.msg, s.hasData = SSEItem{}, false
			s.data.Reset()
			return out, nil
		}
		if line[0] == ':' {
			return SSEItem{Comment: string(bytes.TrimPrefix(line[1:], []byte{' '})), IsComment: true}, nil
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(field) {
		case "data":
			s.data.Write(value)
			s.data.WriteByte('\n')
			s.hasData = true
		case "event":
			s.msg.Event = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.msg.ID, s.msg.HasID = string(value), true
			}
		}
	}
}

// readLine returns one line without its terminator.
func (s *SSEReader) readLine() ([]byte, error) {
	var long []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(long)+len(chunk) > s.maxLine {
				return nil, ErrSSELineTooLong
			}
			long = append(long, chunk...)
			continue
		}
		if err != nil {
			if err == io.EOF && len(chunk)+len(long) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			if err == io.EOF {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("sse: %w", err)
		}
		if long != nil {
			chunk = append(long, chunk...)
		}
		if len(chunk) > s.maxLine+2 {
			return nil, ErrSSELineTooLong
		}
		chunk = chunk[:len(chunk)-1]
		if n := len(chunk); n > 0 && chunk[n-1] == '\r' {
			chunk = chunk[:n-1]
		}
		return chunk, nil
	}
}
