package beds

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

func bed(name string, step int, aliases ...string) Bed {
	return Bed{Name: name, Step: step, Aliases: aliases, Owner: "bus", Summary: "s",
		Features: []string{name + ".feature"}, Timeout: time.Minute}
}

func TestAllIsGenesisAtStepOne(t *testing.T) {
	all := All()
	if len(all) == 0 || all[0].Name != "genesis" || all[0].Step != 1 {
		t.Fatalf("expected genesis first at step 1, got %+v", all)
	}
	if got := all[0].Features; len(got) != 1 || got[0] != "1-genesis.feature" {
		t.Fatalf("expected genesis to run 1-genesis.feature, got %v", got)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1].Step >= all[i].Step {
			t.Fatalf("expected beds in step order, got %d before %d", all[i-1].Step, all[i].Step)
		}
	}
}

func TestLookup(t *testing.T) {
	s := Set{bed("genesis", 1, "genesis-broker"), bed("adoption", 2)}
	for arg, want := range map[string]string{
		"genesis":          "genesis",
		"1":                "genesis",
		"genesis-broker":   "genesis",
		"2":                "adoption",
		"all":              "genesis,adoption",
		"adoption,genesis": "genesis,adoption",
		"1,genesis":        "genesis",
	} {
		got, err := s.Lookup(arg)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", arg, err)
		}
		var names []string
		for _, b := range got {
			names = append(names, b.Name)
		}
		if strings.Join(names, ",") != want {
			t.Errorf("Lookup(%q): expected %s, got %s", arg, want, strings.Join(names, ","))
		}
	}
	for _, arg := range []string{"genesys", "3", "", "genesis,nope"} {
		_, err := s.Lookup(arg)
		if !errors.Is(err, ErrUnknownBed) {
			t.Errorf("Lookup(%q): expected ErrUnknownBed, got %v", arg, err)
			continue
		}
		if !strings.Contains(err.Error(), "genesis (1), adoption (2), all") {
			t.Errorf("Lookup(%q): expected the valid beds in %q", arg, err)
		}
	}
}

func TestLookupPackageLevel(t *testing.T) {
	got, err := Lookup("1")
	if err != nil || len(got) != 1 || got[0].Name != "genesis" {
		t.Fatalf("expected Lookup(\"1\") to be genesis, got %v, %v", got, err)
	}
}

func TestRegistryRefuses(t *testing.T) {
	features := fstest.MapFS{"genesis.feature": {}, "adoption.feature": {}}
	noOwner := bed("adoption", 2)
	noOwner.Owner = ""
	badFeature := bed("adoption", 2)
	badFeature.Features = []string{"../x.feature"}
	missing := bed("living", 4)
	for name, tc := range map[string]struct {
		second Bed
		want   string
	}{
		"same name":       {bed("genesis", 2), `"genesis" is already bed genesis`},
		"same step":       {bed("adoption", 1), `"1" is already bed genesis`},
		"alias of other":  {bed("adoption", 2, "gen"), `"gen" is already bed genesis`},
		"fine alias":      {bed("adoption", 2, "adopt"), ""},
		"reserved":        {bed("all", 2), "reserved"},
		"bad name":        {bed("Adoption", 2), "must match"},
		"no owner":        {noOwner, "no owner"},
		"escaping path":   {badFeature, "relative path"},
		"missing feature": {missing, "living.feature"},
		"no timeout":      {func() Bed { b := bed("adoption", 2); b.Timeout = 0; return b }(), "timeout"},
		"step zero":       {bed("adoption", 0), "step 0"},
	} {
		t.Run(name, func(t *testing.T) {
			r := NewRegistry(features)
			r.Add(bed("genesis", 1, "gen"))
			r.Add(tc.second)
			err := r.Err()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("expected %+v accepted, got %v", tc.second, err)
				}
				return
			}
			if !errors.Is(err, ErrBadBed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("expected ErrBadBed mentioning %q, got %v", tc.want, err)
			}
			if n := len(r.Beds()); n != 1 {
				t.Fatalf("expected the refused bed left out, got %d beds", n)
			}
		})
	}
}

func TestRegistryOrdersBySteps(t *testing.T) {
	r := NewRegistry(nil)
	r.Add(bed("cutover", 5))
	r.Add(bed("genesis", 1))
	r.Add(bed("living", 4))
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range r.Beds() {
		got = append(got, b.Name)
	}
	if strings.Join(got, " ") != "genesis living cutover" {
		t.Fatalf("expected step order, got %v", got)
	}
}

func TestLoadChecksFeatures(t *testing.T) {
	if _, err := Load(fstest.MapFS{}); !errors.Is(err, ErrBadBed) || !strings.Contains(err.Error(), "1-genesis.feature") {
		t.Fatalf("expected a missing 1-genesis.feature refused, got %v", err)
	}
	set, err := Load(fstest.MapFS{"1-genesis.feature": {}, "2-adoption.feature": {}, "3-conformance.feature": {}, "4-living.feature": {}, "5-cutover.feature": {}})
	if err != nil || len(set) == 0 {
		t.Fatalf("expected the beds loaded, got %v, %v", set, err)
	}
}

func TestCheckTags(t *testing.T) {
	for _, ok := range []string{"", "@reload", "~@slow", "@a && ~@b", "@a,@b", "reload", " @a && @b , @c "} {
		if err := checkTags(ok); err != nil {
			t.Errorf("checkTags(%q): expected accepted, got %v", ok, err)
		}
	}
	for _, bad := range []string{"@a &&", ",", "not @slow", "@a || @b", "@a and @b", "(@a)", "!@a"} {
		if err := checkTags(bad); !errors.Is(err, ErrBadTags) {
			t.Errorf("checkTags(%q): expected ErrBadTags, got %v", bad, err)
		}
	}
}
