package policy

import (
	"encoding/json"
	"errors"

	"github.com/dsh-container/dsh-container/egress"
)

// parseEgress decodes the egress section strictly into an egress.Config
// and validates it with egress's own grammar; zero caps stay zero (New
// gives them egress's defaults) and caFile stays a path (New reads it).
func parseEgress(raw json.RawMessage) (*egress.Config, error) {
	fields, err := object("egress", raw, "allow", "maxBytes", "maxConnections", "allowPrivate", "caFile")
	if err != nil {
		return nil, err
	}
	e := &egress.Config{}
	if v, ok := fields["allow"]; ok {
		if err := json.Unmarshal(v, &e.Allow); err != nil {
			return nil, invalid("egress.allow", "must be an array of \"host:port\" strings")
		}
	}
	if v, ok := fields["maxBytes"]; ok {
		if err := json.Unmarshal(v, &e.MaxBytes); err != nil {
			return nil, invalid("egress.maxBytes", "must be an integer number of bytes")
		}
	}
	if v, ok := fields["maxConnections"]; ok {
		if err := json.Unmarshal(v, &e.MaxConnections); err != nil {
			return nil, invalid("egress.maxConnections", "must be an integer")
		}
	}
	if v, ok := fields["allowPrivate"]; ok {
		if err := json.Unmarshal(v, &e.AllowPrivate); err != nil {
			return nil, invalid("egress.allowPrivate", "must be an array of addresses or CIDR prefixes")
		}
	}
	if v, ok := fields["caFile"]; ok {
		if err := json.Unmarshal(v, &e.CAFile); err != nil || e.CAFile == "" {
			return nil, invalid("egress.caFile", "must be the path of a PEM file")
		}
	}
	if err := e.Validate(); err != nil {
		var ce *egress.ConfigError
		if errors.As(err, &ce) {
			return nil, invalid("", "%s", ce.Describe("egress."))
		}
		return nil, invalid("egress", "%v", err)
	}
	return e, nil
}
