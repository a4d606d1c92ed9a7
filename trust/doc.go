// Package trust owns who may write the ledger: the root identity, the
// enrollment records it signs for gateway keys, the keyring of enrolled
// keys a gateway checks every event against, the key files (0600, fsynced,
// never in a stream), and sealing the fingerprint key to enrolled keys.
//
// It is domain code: it imports no NATS, Pebble or Connect. The meta
// stream's records reach it through a lookup function the server wires.
package trust
