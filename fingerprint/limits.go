package fingerprint

// Limits on caller input. Both bound the work and memory one request can
// cost before it is refused.
const (
	// MaxArgumentsBytes is the largest raw Arguments accepted; larger ones
	// are refused with ErrTooLarge.
	MaxArgumentsBytes = 64 << 10

	// MaxDepth is the deepest nesting of objects and arrays accepted in
	// Arguments, the top-level object counting as 1. Deeper input is refused
	// with ErrInvalidArguments. Defaults must fit within it as well.
	MaxDepth = 32
)
