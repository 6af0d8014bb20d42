package main

// sequence accounts for the sequence numbers consumed back: each is
// received once, again (a duplicate), or never while a higher one was (a
// gap, counted lost until it arrives late). Numbers start at 1.
type sequence struct {
	// floor: every number up to it was received; above holds those
	// received beyond it, which stay few unless a gap never closes.
	floor    uint64
	above    map[uint64]struct{}
	highest  uint64
	received uint64
	dups     uint64
}

// add records n and reports whether it was new.
func (s *sequence) add(n uint64) bool {
	if n == 0 {
		return false
	}
	if _, again := s.above[n]; n <= s.floor || again {
		s.dups++
		return false
	}
	if s.above == nil {
		s.above = map[uint64]struct{}{}
	}
	s.above[n] = struct{}{}
	for {
		if _, ok := s.above[s.floor+1]; !ok {
			break
		}
		delete(s.above, s.floor+1)
		s.floor++
	}
	s.received++
	s.highest = max(s.highest, n)
	return true
}

// lost is how many numbers below the highest received were never
// received.
func (s *sequence) lost() uint64 { return s.highest - s.received }
