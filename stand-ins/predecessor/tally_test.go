package main

import "testing"

func TestSequenceCountsGapsAndDuplicates(t *testing.T) {
	tests := []struct {
		name                       string
		in                         []uint64
		received, lost, dups, high uint64
	}{
		{"in order", []uint64{1, 2, 3, 4}, 4, 0, 0, 4},
		{"a gap", []uint64{1, 2, 5}, 3, 2, 0, 5},
		{"a gap that closes late", []uint64{1, 3, 4, 2}, 4, 0, 0, 4},
		{"a duplicate below the floor", []uint64{1, 2, 3, 2}, 3, 0, 1, 3},
		{"a duplicate above a gap", []uint64{1, 3, 3}, 2, 1, 1, 3},
		{"nothing yet", nil, 0, 0, 0, 0},
		{"zero is not a number sent", []uint64{0, 1}, 1, 0, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s sequence
			for _, n := range tc.in {
				s.add(n)
			}
			if s.received != tc.received || s.lost() != tc.lost || s.dups != tc.dups || s.highest != tc.high {
				t.Errorf("received %d lost %d duplicated %d highest %d, want %d %d %d %d",
					s.received, s.lost(), s.dups, s.highest, tc.received, tc.lost, tc.dups, tc.high)
			}
		})
	}
}

func TestSequenceKeepsLittleWhenInOrder(t *testing.T) {
	var s sequence
	for n := uint64(1); n <= 10000; n++ {
		s.add(n)
	}
	if len(s.above) != 0 || s.floor != 10000 {
		t.Errorf("kept %d numbers above floor %d, want none above 10000", len(s.above), s.floor)
	}
}
