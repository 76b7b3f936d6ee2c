package expr

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"math"
	"strings"
	"time"
	_ "time/tzdata" // time.format must know every tz database name on any host
)

// timeLayout is time.format's output: ISO 8601 with microseconds and "Z" for
// UTC, e.g. "2024-07-12T14:50:33.000000+02:00".
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// registerSys adds sys (non-blocking part), time, uuid, hash and the retry
// predicates.
func registerSys(b *builder, opts StdlibOptions) {
	b.fn("sys.now", nil, noCtx(func([]any) (any, error) {
		// Google documents nanosecond precision; the double keeps what it can.
		return float64(opts.Now().UnixNano()) / 1e9, nil
	}))
	b.fn("sys.get_env", params(req("name"), opt("default", nil)), noCtx(func(a []any) (any, error) {
		name, err := argString("sys.get_env", "name", a[0])
		if err != nil {
			return nil, err
		}
		if v, ok := opts.Env[name]; ok {
			return v, nil
		}
		return a[1], nil
	}))
	b.fn("uuid.generate", nil, noCtx(func([]any) (any, error) {
		u, err := opts.UUID()
		if err != nil {
			return nil, SystemError("uuid.generate: %s", err.Error())
		}
		return u, nil
	}))

	b.fn("time.format", params(req("seconds"), opt("timezone", "")), noCtx(timeFormat))
	b.fn("time.parse", params(req("value")), noCtx(func(a []any) (any, error) {
		s, err := argString("time.parse", "value", a[0])
		if err != nil {
			return nil, err
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, ValueError("time.parse: %q is not an RFC 3339 timestamp", s)
		}
		return float64(t.UnixMicro()) / 1e6, nil
	}))

	b.fn("hash.compute_checksum", params(req("data"), req("algorithm")), noCtx(func(a []any) (any, error) {
		data, err := argBytes("hash.compute_checksum", "data", a[0])
		if err != nil {
			return nil, err
		}
		h, err := hashAlgorithm("hash.compute_checksum", a[1])
		if err != nil {
			return nil, err
		}
		d := h()
		d.Write(data)
		return d.Sum(nil), nil
	}))
	b.fn("hash.compute_hmac", params(req("key"), req("data"), req("algorithm")), noCtx(func(a []any) (any, error) {
		key, err := argBytes("hash.compute_hmac", "key", a[0])
		if err != nil {
			return nil, err
		}
		data, err := argBytes("hash.compute_hmac", "data", a[1])
		if err != nil {
			return nil, err
		}
		h, err := hashAlgorithm("hash.compute_hmac", a[2])
		if err != nil {
			return nil, err
		}
		m := hmac.New(h, key)
		m.Write(data)
		return m.Sum(nil), nil
	}))

	b.fn("retry.always", params(req("e")), noCtx(func([]any) (any, error) { return true, nil }))
	b.fn("retry.never", params(req("e")), noCtx(func([]any) (any, error) { return false, nil }))
}

func hashAlgorithm(fn string, v any) (func() hash.Hash, error) {
	name, err := argString(fn, "algorithm", v)
	if err != nil {
		return nil, err
	}
	// The algorithms hash.compute_checksum documents, by their documented names.
	switch name {
	case "MD5":
		return md5.New, nil
	case "SHA1":
		return sha1.New, nil
	case "SHA224":
		return sha256.New224, nil
	case "SHA256":
		return sha256.New, nil
	case "SHA384":
		return sha512.New384, nil
	case "SHA512":
		return sha512.New, nil
	}
	return nil, ValueError("%s: unsupported algorithm %q", fn, name)
}

// timeFormat is time.format(seconds, timezone): seconds since the epoch (an
// integer or a double, rounded to the microsecond) rendered in the named tz
// database zone, UTC when the name is empty.
func timeFormat(a []any) (any, error) {
	secs, err := argNumber("time.format", "seconds", a[0])
	if err != nil {
		return nil, err
	}
	tz, err := argString("time.format", "timezone", a[1])
	if err != nil {
		return nil, err
	}
	loc := time.UTC
	if tz != "" {
		if loc, err = time.LoadLocation(tz); err != nil || strings.EqualFold(tz, "Local") {
			return nil, ValueError("time.format: unknown timezone %q", tz)
		}
	}
	var t time.Time
	if i, ok := a[0].(int64); ok {
		t = time.Unix(i, 0)
	} else {
		micros := math.Round(secs * 1e6)
		if math.IsNaN(micros) || math.Abs(micros) > 253402300799e6 { // beyond year 9999
			return nil, ValueError("time.format: timestamp %s is out of range", FormatDouble(secs))
		}
		t = time.UnixMicro(int64(micros))
	}
	if y := t.Year(); y < 1 || y > 9999 {
		return nil, ValueError("time.format: timestamp %s is out of range", Display(a[0]))
	}
	return t.In(loc).Format(timeLayout), nil
}
