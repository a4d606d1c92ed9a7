// Package fingerprint owns the canonical action record and the keyed digests
// the ledger stores about an action: the fingerprint (finds a possibly
// related prior execution when the correlation changed) and the request
// digest (detects an operation key reused with a different request).
//
// A caller's arguments are parsed strictly, normalized by the tool's
// contract.FingerprintRules (defaults applied, ignored fields removed,
// secrets replaced by keyed digests), placed in the canonical action record
// and serialized as RFC 8785 canonical JSON. Every digest is HMAC-SHA256 under
// a key derived from the ledger's Key with its own domain string, so a digest
// of one kind can never be mistaken for another and nothing here can be
// recomputed without the key.
//
// Numbers are accepted only when RFC 8785 writes exactly the value that was
// sent: 1, 1.0, 1e0 and 10E-1 are one number, but 9007199254740993 (which an
// IEEE 754 double rounds to ...992) is refused rather than silently merged
// with a different request. Such values must be sent as strings.
//
// This is pure domain code: apart from LoadOrCreateKey it does no I/O, it
// never logs, and it must not import NATS, Pebble or Connect. Error messages
// name paths but never echo argument values, so they are safe to log even
// when the arguments carry secrets.
package fingerprint
