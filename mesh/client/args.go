package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/meshbus/mesh/mesh/wire"
)

// emptyArgs is what a call without arguments sends: a tool's arguments
// are an object (wire.CheckArgsSchema), and no arguments is the empty one.
var emptyArgs = []byte("{}")

// CheckCall refuses, as Call would (KindUsage), a tool name not in the
// form "<module>.<tool>" and arguments that are not one JSON object, and
// returns the arguments Call would send. A program checks with it before
// it connects, so that bad input is bad input whether or not the bus
// answers (issue 18: with the bus down, mesh call exited 1 for it).
func CheckCall(name string, args []byte) ([]byte, error) {
	if _, _, err := splitName(name); err != nil {
		return nil, err
	}
	return checkArgs(name, args)
}

// splitName reads "<module>.<tool>", the name a tool is called by from
// outside (wire.ToolInfo.Name). Neither part has a dot, so the first one
// splits them.
func splitName(name string) (module, tool string, err error) {
	module, tool, ok := strings.Cut(name, ".")
	if !ok {
		return "", "", failure(KindUsage, name, nil, "tool name %q: want <module>.<tool>, such as sensor.calibrate", name)
	}
	if err := wire.CheckName(module); err != nil {
		return "", "", failure(KindUsage, name, err, "tool name %q: the module: %v", name, err)
	}
	if err := wire.CheckToolName(tool); err != nil {
		return "", "", failure(KindUsage, name, err, "tool name %q: the tool: %v", name, err)
	}
	return module, tool, nil
}

// checkArgs refuses arguments that are not one JSON object, saying what
// was wrong and where, before anything is sent: the tool would refuse
// them anyway, later and less clearly. Empty arguments are the empty
// object.
func checkArgs(name string, args []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		return emptyArgs, nil
	}
	if !json.Valid(trimmed) {
		var v any
		err := json.Unmarshal(trimmed, &v)
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, failure(KindUsage, name, err, "arguments are not JSON: %v at offset %d", syn, syn.Offset)
		}
		return nil, failure(KindUsage, name, err, "arguments are not JSON: %v", err)
	}
	if trimmed[0] != '{' {
		return nil, failure(KindUsage, name, nil, "arguments are a JSON %s, not an object: a tool takes an object, such as {} or {\"to\":21}", jsonKind(trimmed[0]))
	}
	return trimmed, nil
}

// jsonKind names the kind of JSON value whose first byte is b.
func jsonKind(b byte) string {
	switch b {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
