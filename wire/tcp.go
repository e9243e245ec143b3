package wire

import (
	"encoding/binary"
	"io"

	"github.com/inboxd/inboxd/wire/pb"
)

// LengthPrefix is the size of the big-endian length before each frame on raw
// TCP.
const LengthPrefix = 4

// ReadTCPFrame reads one length-prefixed frame from r into buf (grown when too
// small) and returns the frame (header and body). A length below HeaderLen or
// above max is an *Error (BAD_FRAME or FRAME_TOO_LARGE) and the stream cannot
// be resynchronised: the caller must close the connection.
func ReadTCPFrame(r io.Reader, buf []byte, max int) ([]byte, error) {
	var pre [LengthPrefix]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(pre[:]))
	if n < HeaderLen {
		return nil, Errorf(pb.ErrorCode_BAD_FRAME, "frame length %d is shorter than the frame header", n)
	}
	if n > max {
		return nil, Errorf(pb.ErrorCode_FRAME_TOO_LARGE, "frame of %d bytes exceeds the limit of %d", n, max)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// AppendLengthPrefix reserves the 4-byte length prefix in dst; after the frame
// has been appended, PutLengthPrefix fills it in.
func AppendLengthPrefix(dst []byte) ([]byte, int) {
	at := len(dst)
	return append(dst, 0, 0, 0, 0), at
}

// PutLengthPrefix writes the length of everything after the prefix at
// position at.
func PutLengthPrefix(b []byte, at int) {
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-LengthPrefix))
}
