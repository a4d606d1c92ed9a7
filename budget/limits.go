package budget

// Limits on what one command or event may carry. They bound the size of an
// event (every decision copies the held list) and keep amounts exact in JSON.
const (
	// MaxAmount is the largest amount, limit or single hold in minor units:
	// 2^53-1, the largest integer an IEEE 754 double (and so RFC 8785 JSON
	// and JavaScript) represents exactly. Larger values are refused with
	// ErrInvalidAmount. Sums (spent, held) may exceed it and are computed
	// with overflow checks.
	MaxAmount int64 = 1<<53 - 1

	// MaxOpenHolds is the most open holds one account may have; a further
	// reservation is refused with ErrTooManyHolds. It bounds HeldListSeen.
	MaxOpenHolds = 1024

	// MaxKeyBytes bounds identifiers: account names, operation keys, request
	// digests, limit digests, delegators, override authors, execution ids
	// and target statuses.
	MaxKeyBytes = 256

	// MaxTextBytes bounds free text: override reasons and evidence notes.
	MaxTextBytes = 1024

	// MaxEventBytes is the largest encoded event DecodeEvent accepts. An
	// event within the other limits always encodes smaller than this.
	MaxEventBytes = 4 << 20
)
