package meshdesc

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// checkArgsJSONSchema checks a tool's arguments as a JSON Schema (draft
// 2020-12, or draft-07 where it says so): every keyword's value of its
// kind, every pattern a regular expression, every $ref resolved (the
// library's Resolve), and, what the library lets through, every keyword
// one of JSON Schema's (or an extension spelled x-…), every type one of
// its seven, no subschema null. Issue 18: the sample's
// `to: {type: number, description: the offset, in the reading's unit}`
// is a YAML flow mapping split at its comma, which gave the property a
// keyword "in the reading's unit": null, and nothing noticed; what a
// catalogue publishes to every caller and agent is checked when the
// description is read.
func checkArgsJSONSchema(schema json.RawMessage) error {
	var raw any
	if err := json.Unmarshal(schema, &raw); err != nil {
		return fmt.Errorf("args: not JSON: %w", err)
	}
	if err := walkSchema(raw, ""); err != nil {
		return fmt.Errorf("args: not a valid JSON Schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("args: not a valid JSON Schema: %w", err)
	}
	if _, err := s.Resolve(nil); err != nil {
		return fmt.Errorf("args: not a valid JSON Schema: %w", err)
	}
	return nil
}

// schemaKeywords are the keywords of JSON Schema draft 2020-12 and
// draft-07, the drafts the library reads.
var schemaKeywords = []string{
	"$schema", "$id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$ref", "$defs", "$comment",
	"$vocabulary", "$recursiveRef", "$recursiveAnchor", "definitions", "dependencies",
	"title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
	"type", "enum", "const", "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
	"minLength", "maxLength", "pattern", "prefixItems", "items", "minItems", "maxItems",
	"additionalItems", "uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems",
	"minProperties", "maxProperties", "required", "dependentRequired", "properties",
	"patternProperties", "additionalProperties", "propertyNames", "unevaluatedProperties",
	"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas",
	"contentEncoding", "contentMediaType", "contentSchema", "format",
}

// The keywords whose value is a schema, an array of schemas, or an object
// of schemas by name.
var (
	schemaValued = []string{"additionalProperties", "items", "contains", "not", "if", "then", "else",
		"propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems", "contentSchema"}
	schemaArrays = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	schemaMaps   = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)

// schemaTypes are the names "type" takes.
var schemaTypes = []string{"null", "boolean", "object", "array", "number", "string", "integer"}

// walkSchema checks the schema v at the JSON pointer at, and each
// subschema below it: what the library's structure does not hold.
func walkSchema(v any, at string) error {
	where := at
	if where == "" {
		where = "/"
	}
	switch s := v.(type) {
	case bool:
		return nil // true and false are schemas
	case nil:
		return fmt.Errorf("%s: null is not a schema (an object or a boolean)", where)
	case map[string]any:
		for _, k := range sortedKeys(s) {
			if !slices.Contains(schemaKeywords, k) && !strings.HasPrefix(k, "x-") {
				hint := ""
				if s[k] == nil {
					hint = " (a YAML flow mapping split at an unquoted comma? quote the value before it)"
				}
				return fmt.Errorf("%s: %q is not a JSON Schema keyword%s; an extension of your own is spelled x-…", where, k, hint)
			}
		}
		if t, ok := s["type"]; ok {
			if err := checkType(t); err != nil {
				return fmt.Errorf("%s: type: %w", where, err)
			}
		}
		for _, k := range schemaValued {
			if sub, ok := s[k]; ok {
				if _, isArray := sub.([]any); isArray && slices.Contains(schemaArrays, k) {
					continue
				}
				if err := walkSchema(sub, at+"/"+k); err != nil {
					return err
				}
			}
		}
		for _, k := range schemaArrays {
			if subs, ok := s[k].([]any); ok {
				for i, sub := range subs {
					if err := walkSchema(sub, fmt.Sprintf("%s/%s/%d", at, k, i)); err != nil {
						return err
					}
				}
			}
		}
		for _, k := range schemaMaps {
			subs, ok := s[k].(map[string]any)
			if !ok {
				continue
			}
			for _, name := range sortedKeys(subs) {
				if subs[name] == nil && k == "properties" {
					return fmt.Errorf("%s/%s: property %q has no schema (null): a YAML flow mapping split at an unquoted comma? quote the value before it", at, k, name)
				}
				if err := walkSchema(subs[name], at+"/"+k+"/"+name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return fmt.Errorf("%s: a %T is not a schema (an object or a boolean)", where, v)
}

// checkType checks the value of "type": one of the seven names, or a
// list of them.
func checkType(t any) error {
	names, ok := t.([]any)
	if !ok {
		names = []any{t}
	}
	for _, n := range names {
		s, ok := n.(string)
		if !ok || !slices.Contains(schemaTypes, s) {
			return fmt.Errorf("%v is not a type (want one of %s)", jsonText(n), strings.Join(schemaTypes, ", "))
		}
	}
	return nil
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
