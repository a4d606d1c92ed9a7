package budget

// addChecked returns a+b and whether it fit in an int64.
func addChecked(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

// commitment returns spent + held + requested and whether it fit in an int64.
func commitment(spent, held, requested int64) (int64, bool) {
	s, ok := addChecked(spent, held)
	if !ok {
		return 0, false
	}
	return addChecked(s, requested)
}

// withinLimit applies docs/design.md §3: spent + held + requested <= limit. A sum
// that overflows is not within any limit.
func withinLimit(spent, held, requested, limit int64) bool {
	total, ok := commitment(spent, held, requested)
	return ok && total <= limit
}

// sumHolds returns the sum of the holds' amounts and whether it fit.
func sumHolds(hs []Hold) (int64, bool) {
	var s int64
	for _, h := range hs {
		var ok bool
		if s, ok = addChecked(s, h.Amount); !ok {
			return 0, false
		}
	}
	return s, true
}
