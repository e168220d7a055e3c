package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// The reference normalizer: the earlier implementation, a tree of Go
// values through encoding/json. canonicalJSON must agree with it on every
// input (FuzzCanonicalMatchesReference); it costs a hundred times the
// input in memory, which is why it is no longer used.

func referenceNormalize(raw []byte) ([]byte, error) {
	v, err := decodeCanonical(raw)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
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
