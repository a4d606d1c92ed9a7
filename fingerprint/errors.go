package fingerprint

import "errors"

// Errors returned by Compute and CheckRules. They are wrapped with context
// saying what is wrong ("arguments: not a JSON object"); test with errors.Is.
var (
	// ErrInvalidArguments: the caller's arguments are not a JSON object this
	// package can canonicalize without losing meaning (bad JSON, duplicate
	// key, too deep, number not exactly representable, lone surrogate).
	ErrInvalidArguments = errors.New("invalid arguments")

	// ErrTooLarge: the raw arguments exceed MaxArgumentsBytes.
	ErrTooLarge = errors.New("arguments too large")

	// ErrInvalidAction: a field of the Action other than Arguments is not
	// valid UTF-8, so two different values could serialize alike.
	ErrInvalidAction = errors.New("invalid action")

	// ErrInvalidRules: the tool's fingerprint rules are unusable (empty path
	// segment, default that is not JSON-representable or too deep). This is
	// a configuration error; CheckRules reports it at start.
	ErrInvalidRules = errors.New("invalid fingerprint rules")
)
