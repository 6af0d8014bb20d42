package driverproto

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The document a driver in another language is written from
// (docs/conformance.md) lists exactly what this package defines: every
// command with its synopsis and capability, every kind with its fields,
// every class, every exit status.
func TestTheDocumentSpeaksThisProtocol(t *testing.T) {
	data, err := os.ReadFile("../../docs/conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)

	cmds := []Command{Connect{}, Emit{}, Consume{}, Serve{}, Call{}, ReadGrant{}}
	rows := docTable(t, doc, "command")
	var listed []string
	for _, r := range rows {
		synopsis := unquote(r[0])
		name, _, _ := strings.Cut(synopsis, " ")
		listed = append(listed, name)
		if Synopsis(name) != synopsis {
			t.Errorf("command %s: the document says %q, the package %q", name, synopsis, Synopsis(name))
		}
		i := slices.IndexFunc(cmds, func(c Command) bool { return c.Name() == name })
		if i >= 0 && string(cmds[i].Capability()) != r[1] {
			t.Errorf("command %s: the document says capability %s, the package %s", name, r[1], cmds[i].Capability())
		}
	}
	if !slices.Equal(listed, Commands()) {
		t.Errorf("expected the document's commands %v, in that order, it lists %v", Commands(), listed)
	}

	bodies := []Body{Identity{}, Emitted{}, Ready{}, Handled{}, Served{}, Result{}, Grant{}, Done{}}
	var kinds []Kind
	for _, r := range docTable(t, doc, "kind") {
		k := Kind(unquote(r[0]))
		kinds = append(kinds, k)
		i := slices.IndexFunc(bodies, func(b Body) bool { return b.Kind() == k })
		if i < 0 {
			continue
		}
		if want, got := jsonFields(bodies[i]), backticked(r[1]); !slices.Equal(want, got) {
			t.Errorf("kind %s: the document lists the fields %v, the package has %v", k, got, want)
		}
	}
	if !slices.Equal(kinds, Kinds) {
		t.Errorf("expected the document's kinds %v, in that order, it lists %v", Kinds, kinds)
	}
	if want := jsonFields(Event{}); !strings.Contains(doc, `{"`+strings.Join(want, `","`)+`"}`) {
		t.Errorf("expected the document to spell EVENT as %v", want)
	}

	var classes []Class
	for _, r := range docTable(t, doc, "class") {
		classes = append(classes, Class(unquote(r[0])))
	}
	if !slices.Equal(classes, Classes) {
		t.Errorf("expected the document's classes %v, in that order, it lists %v", Classes, classes)
	}

	var exits []int
	for _, r := range docTable(t, doc, "status") {
		n, err := strconv.Atoi(unquote(r[0]))
		if err != nil {
			t.Fatalf("exit status %q: %v", r[0], err)
		}
		exits = append(exits, n)
	}
	if !slices.Equal(exits, Exits) {
		t.Errorf("expected the document's exit statuses %v, it lists %v", Exits, exits)
	}
}

// docTable is the rows (cells trimmed, "\|" read as "|") of the table
// whose first column is named first.
func docTable(t *testing.T, doc, first string) [][]string {
	t.Helper()
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "| "+first+" |") {
			continue
		}
		var rows [][]string
		for _, row := range lines[i+2:] {
			if !strings.HasPrefix(row, "|") {
				break
			}
			cells := strings.Split(strings.ReplaceAll(strings.Trim(row, "|"), `\|`, "\x00"), "|")
			for j := range cells {
				cells[j] = strings.ReplaceAll(strings.TrimSpace(cells[j]), "\x00", "|")
			}
			rows = append(rows, cells)
		}
		return rows
	}
	t.Fatalf("the document has no table of %s", first)
	return nil
}

func unquote(cell string) string { return strings.Trim(cell, "`") }

var tickRE = regexp.MustCompile("`([^`]+)`")

// backticked is every `name` in a cell, in order.
func backticked(cell string) []string {
	var out []string
	for _, m := range tickRE.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// jsonFields is the JSON names of a body's fields, in order.
func jsonFields(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}
