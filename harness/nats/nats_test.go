package nats

import (
	"slices"
	"testing"
)

func TestSetFlag(t *testing.T) {
	cases := []struct {
		in, want []string
	}{
		{nil, []string{"--poll=2s"}},
		{[]string{"--config=/c", "--poll=1s"}, []string{"--config=/c", "--poll=2s"}},
		{[]string{"-poll=1s", "--", "-DV"}, []string{"--poll=2s", "--", "-DV"}},
		{[]string{"--config=/c", "--", "--poll=9s"}, []string{"--config=/c", "--poll=2s", "--", "--poll=9s"}},
	}
	for _, c := range cases {
		if got := setFlag(c.in, "poll", "2s"); !slices.Equal(got, c.want) {
			t.Errorf("setFlag(%q): expected %q, got %q", c.in, c.want, got)
		}
	}
}
