package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultMaxBodyBytes bounds a request body. A prompt of a million tokens
// is a few MB of JSON; much more is a mistake or an attack, answered 413
// before it is buffered.
const DefaultMaxBodyBytes = 16 << 20

func tooLarge(limit int64) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, typ: typeInvalid, code: "request_too_large",
		msg: "Request body is larger than the server's limit of " + byteSize(limit) + "."}
}

// readJSON reads and decodes a request body into v, mapping every failure
// to the 4xx a client can act on.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *apiError {
	// A declared length over the limit is refused before reading a byte
	// (and the connection closed rather than the body drained).
	if r.ContentLength > limit {
		closeAfterAnswer(w)
		return tooLarge(limit)
	}
	body, err := readBody(w, r, limit)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return tooLarge(limit)
		case isTimeout(err):
			closeAfterAnswer(w)
			return stalledBodyError()
		case errors.Is(err, errBodyBudget):
			closeAfterAnswer(w)
			return busyError()
		}
		return badRequest("", "reading the request body: %v", err)
	}
	// Large bodies are decoded a few at a time (limits.go); reading them
	// is not gated, so a slow sender holds no slot.
	defer enterDecode(r, int64(len(body)))()
	// encoding/json silently replaces invalid UTF-8 with U+FFFD; a prompt
	// that is not text is refused instead of being generated from.
	if !utf8.Valid(body) {
		return badRequest("", "The request body is not valid UTF-8.")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "The request body is empty; expected a JSON object.")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return jsonError(err)
	}
	return nil
}

// readBody reads the whole body into one buffer of the declared length
// (io.ReadAll would grow it by doubling: twice the memory, and copies).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength <= 0 {
		return io.ReadAll(rd)
	}
	// One byte more than declared, so that io.ReadFull sees the end.
	buf := make([]byte, r.ContentLength+1)
	n, err := io.ReadFull(rd, buf)
	switch err {
	case io.ErrUnexpectedEOF, io.EOF:
		if int64(n) == r.ContentLength {
			return buf[:n], nil
		}
		return nil, err
	case nil:
		// More than declared: net/http does not allow that; read on to
		// get its error.
		_, err = rd.Read(buf[:1])
		return nil, err
	}
	return nil, err
}

// jsonError names the field a type error is about, so clients get
// "param": "max_tokens" rather than a Go type name alone.
func jsonError(err error) *apiError {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return badRequest("", "Malformed JSON in the request body: %v (at byte %d).", se, se.Offset)
	case errors.As(err, &te):
		if te.Field == "" {
			return badRequest("", "The request body must be a JSON object, not a JSON %s.", te.Value)
		}
		// Fields promoted from the embedded commonFields carry its name.
		field := strings.ReplaceAll(te.Field, "commonFields.", "")
		return badRequest(field, "Invalid type for '%s': expected %s, got a JSON %s.", field, jsonTypeName(te.Type.Kind().String()), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "Malformed JSON in the request body: unexpected end of input.")
	}
	return badRequest("", "Invalid request body: %v", err)
}

func jsonTypeName(kind string) string {
	switch kind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "ptr":
		return "a value"
	}
	return kind
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return itoa(n>>10) + " KiB"
	}
	return itoa(n) + " bytes"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
