package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/containerd/errdefs"
)

// NormalizeArguments returns the canonical JSON of a call's arguments, the
// form every tool, hook, guard and event sees:
//
//   - empty input (no arguments at all) becomes {};
//   - the input must be one valid JSON value: NaN, Infinity, undefined and
//     other non-JSON tokens are rejected, as is trailing data and a number
//     too large for a float64 (1e400 would read back as Infinity);
//   - lossy input is rejected rather than repaired: invalid UTF-8, an escaped
//     lone surrogate (\ud800) and an object with a duplicate key (parsers
//     disagree on which value wins);
//   - the output is compact, object keys are sorted, strings are re-escaped
//     minimally (no HTML escaping) and numbers keep their exact text, so
//     integers beyond 2^53 survive.
//
// Errors wrap errdefs.ErrInvalidArgument.
func NormalizeArguments(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{}`), nil
	}
	v, err := decodeCanonical(raw)
	if err != nil {
		return nil, errorf(errdefs.ErrInvalidArgument, "arguments are not lossless JSON: %w", err)
	}
	return encodeCanonical(v)
}

// decodeCanonical decodes one JSON value into maps, slices, json.Number,
// strings, bools and nil, rejecting everything NormalizeArguments rejects.
func decodeCanonical(raw []byte) (any, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("invalid UTF-8")
	}
	if err := checkSurrogates(raw); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxErr(err)
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch tok {
		case '{':
			obj := make(map[string]any)
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, syntaxErr(err)
				}
				key := kt.(string) // the decoder only yields string keys here
				if _, dup := obj[key]; dup {
					return nil, fmt.Errorf("duplicate object key %s", strconv.Quote(key))
				}
				if obj[key], err = decodeValue(dec); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, syntaxErr(err)
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, syntaxErr(err)
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected %q", tok)
	case json.Number:
		if f, err := strconv.ParseFloat(string(tok), 64); err != nil && math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %s overflows a float64 (Infinity)", tok)
		}
		return tok, nil
	default: // string, bool, nil
		return tok, nil
	}
}

func syntaxErr(err error) error {
	if err == io.EOF {
		return errors.New("unexpected end of JSON input")
	}
	return err
}

// checkSurrogates rejects \uXXXX escapes that encode a lone UTF-16
// surrogate, which decoders silently turn into U+FFFD. raw is valid UTF-8;
// invalid JSON is left for the decoder to report.
func checkSurrogates(raw []byte) error {
	s := string(raw)
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(s) {
				return nil
			}
			if s[i+1] != 'u' {
				i++
				continue
			}
			r, ok := hex4(s, i+2)
			if !ok {
				return nil // the decoder reports it
			}
			i += 5
			switch {
			case utf16.IsSurrogate(r) && r < 0xDC00: // high: a low must follow
				if !strings.HasPrefix(s[i+1:], `\u`) {
					return errors.New(`lone UTF-16 surrogate escape \u` + s[i-3:i+1])
				}
				lo, ok := hex4(s, i+3)
				if !ok || !(lo >= 0xDC00 && lo <= 0xDFFF) {
					return errors.New(`lone UTF-16 surrogate escape \u` + s[i-3:i+1])
				}
				i += 6
			case utf16.IsSurrogate(r):
				return errors.New(`lone UTF-16 surrogate escape \u` + s[i-3:i+1])
			}
		}
	}
	return nil
}

func hex4(s string, at int) (rune, bool) {
	if at+4 > len(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s[at:at+4], 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(n), true
}

// encodeCanonical encodes a decodeCanonical value compactly, keys sorted,
// without HTML escaping.
func encodeCanonical(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, errorf(errdefs.ErrInvalidArgument, "encode JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
